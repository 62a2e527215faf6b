"""What the HTML and Markdown reports of a fixed set of runs hold is what tests/data/outlines/
recorded (tests/unit/report_outlines.py): sections, tables cell by cell, charts trace by
trace. A difference fails; if it is meant, regenerate them and commit them with the change."""

from __future__ import annotations

import pytest

from tests.unit.report_outlines import CASES, OUTLINE_DIR, SEVERAL, outlines

REGENERATE = "if this change is meant, run `.venv/bin/python -m tests.unit.report_outlines write`"
NOW = outlines()


@pytest.mark.parametrize("name", sorted(NOW))
def test_what_a_report_holds_is_unchanged(name: str) -> None:
    recorded = (OUTLINE_DIR / f"{name}.json").read_text()
    assert NOW[name] == recorded, f"{name}.json differs; {REGENERATE}"


def test_every_outline_file_belongs_to_a_case() -> None:
    assert {p.stem for p in OUTLINE_DIR.glob("*.json")} == {*CASES, *SEVERAL}
