"""The HTML report as a person sees it: headless Chromium opens the file with the network
unused, and every chart draws without an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import check_report, chromium_path
from tests.unit.test_report import make_report, report_store  # noqa: F401  (a fixture)

pytestmark = pytest.mark.skipif(
    chromium_path() is None,
    reason="chromium is not installed; `bash scripts/setup.sh test` installs it as root",
)


def test_report_loads_offline_and_draws_every_chart(
    report_store: tuple[str, list[int]],  # noqa: F811
    tmp_path: Path,
) -> None:
    store, ids = report_store
    page = tmp_path / "storage.html"
    make_report(store, ids, page)
    seen, state = check_report(page)
    assert seen.foreign_requests(page.resolve().as_uri()) == []
    assert seen.failed_requests == []
    assert seen.console_errors == []
    assert seen.exceptions == []
    assert state["errors"] == []
    assert state["total"] == 7  # by clients: TPS, latency; per second: 2; fio: 2; load: 1
    assert state["drawn"] == state["drawnMarks"] == state["total"]
    assert state["failed"] == 0
    assert state["svgs"] >= state["total"]  # plotly draws each chart as SVG layers
