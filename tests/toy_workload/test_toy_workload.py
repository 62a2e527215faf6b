"""A workload added as one package, editing no file of howfast (issue 27): this package,
installed as a distribution installs a plug-in (a dist-info with an entry point in the
`howfast.workloads` group, on PYTHONPATH), is planned, run on a real local target (a throwaway
PostgreSQL cluster in a directory), stored, grouped by its own param `rows`, derived (rows
per second, from the stored time of a sum), and shown in `results show`, in `--json`, in the
HTML report (opened in Chromium when it is installed) and in `export prometheus`.

howfast runs as a subprocess, as a user runs it; the test reads the store in-process too, with
the distribution on sys.path and the workload registry reset around it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest

from howfast.analysis.groups import group_steps
from howfast.plugin import registry
from howfast.service.reading import read_run
from howfast.store import open_store
from tests.browser import Chromium, chromium_path
from tests.conftest import shared_tmpdir

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PLAN = """
description = "the toy workload, added as one package"
[settings]
shared_buffers = "32MB"
[[steps]]
workload = "toy"
rows = [10, 1000]
queries = 5
"""
ENTRY_POINT = "toy = tests.toy_workload.plan:PLUGIN"


def install(site: Path) -> None:
    """What installing a distribution that declares the toy leaves on the path."""
    info = site / "howfast_toy-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: howfast-toy\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[howfast.workloads]\n{ENTRY_POINT}\n")


class Howfast:
    def __init__(self, store: Path, workdir: Path, site: Path | None) -> None:
        self.store, self.workdir, self.site = store, workdir, site

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        path = [str(ROOT), *([str(self.site)] if self.site else [])]
        env = {**os.environ, "HOWFAST_STORE": str(self.store), "PYTHONPATH": os.pathsep.join(path)}
        return subprocess.run(
            [sys.executable, "-m", "howfast", *args],
            env=env, cwd=self.workdir, capture_output=True, text=True, timeout=240, check=False,
        )  # fmt: skip


@pytest.fixture
def toy(tmp_path: Path) -> Iterator[tuple[Howfast, Path]]:
    """howfast with the toy installed, and a target directory the unprivileged PostgreSQL
    user can reach."""
    install(tmp_path / "site")
    base = shared_tmpdir("howfast-toy-")
    target = base / "bench"
    target.mkdir()
    target.chmod(0o755)
    try:
        yield Howfast(tmp_path / "results.db", tmp_path, tmp_path / "site"), target
    finally:
        shutil.rmtree(base, ignore_errors=True)


class Tables(HTMLParser):
    """The rows of every table of a page, by the id of the section that holds it."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, list[list[str]]] = {}
        self.section = ""
        self.row: list[str] | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "section":
            self.section = dict(attrs).get("id") or ""
        elif tag == "tr":
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.cell = []

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.row is not None and self.cell is not None:
            self.row.append("".join(self.cell).strip())
            self.cell = None
        elif tag == "tr" and self.row is not None:
            self.sections.setdefault(self.section, []).append(self.row)
            self.row = None


def test_a_workload_added_as_one_package_runs_and_shows_everywhere(
    toy: tuple[Howfast, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    howfast, target = toy
    plan = tmp_path / "toy.toml"
    plan.write_text(PLAN)

    # The plan, planned: two tests (rows 10 and 1000), twice each, psql's argv and input.
    dry = howfast("run", str(plan), "--target", str(target), "--repeat", "2", "--dry-run",
                  "--json")  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)
    text = json.dumps(planned)
    assert text.count('"workload": "toy"') == 4, text[:2000]
    assert "generate_series(1, 10) g" in text and "generate_series(1, 1000) g" in text
    assert '"-f", "toy.sql"' in text

    # Run on a real target, stored, derived.
    ran = howfast("run", str(plan), "--target", str(target), "--repeat", "2", "--json")
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "ms per sum" in ran.stderr  # the end-of-step line the toy declares
    doc = json.loads(ran.stdout)
    assert doc["status"] == "completed"
    steps = doc["steps"]
    assert [(s["workload"], s["params"]["rows"]) for s in steps] == [
        ("toy", 10), ("toy", 10), ("toy", 1000), ("toy", 1000)
    ]  # fmt: skip
    for step in steps:
        assert step["status"] == "completed", step["error"]
        m = step["metrics"]
        assert m["toy_timed_queries"] == 5 and m["toy_query_ms"] > 0
        # Derived when read: the rows over the time of one sum.
        expected = step["params"]["rows"] / (m["toy_query_ms"] / 1000)
        assert m["toy_rows_per_s"] == pytest.approx(expected)
        assert step["cpu"] is not None  # sampled: the samplers watched it
    run_id = doc["id"]

    # results show --json: the same document, read back from the store.
    shown = howfast("results", "show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["steps"] == steps

    # Grouped by its own param: two tests of two repetitions.
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    registry.reset()
    try:
        assert "toy" in registry.plugins()
        with open_store(str(howfast.store)) as db:
            run = read_run(db, int(run_id))
        assert run is not None
        groups = group_steps(run)
        assert [(dict(g.params), g.n) for g in groups] == [
            ({"rows": 10, "queries": 5}, 2),
            ({"rows": 1000, "queries": 5}, 2),
        ]
        assert all(g.value("toy_rows_per_s") is not None for g in groups)
    finally:
        monkeypatch.undo()
        registry.reset()
        for name in [m for m in sys.modules if m.startswith("tests.toy_workload.")]:
            if name != __name__:
                sys.modules.pop(name)
    assert "toy" not in registry.plugins()

    # results show: the toy's own table, a row per test with its 2 repetitions.
    table = howfast("results", "show", run_id)
    assert table.returncode == 0, table.stderr
    assert "toy: rows summed per second" in table.stdout
    rows = [line.split("│") for line in table.stdout.splitlines() if line.count("│") >= 5]
    toy_rows = [[c.strip() for c in r[1:3]] for r in rows if r[1].strip() in ("10", "1000")]
    assert toy_rows == [["10", "2"], ["1000", "2"]], table.stdout

    # The HTML report: a "toy" section with both tests.
    page = tmp_path / "r.html"
    report = howfast("report", run_id, "-o", str(page))
    assert report.returncode == 0, report.stderr
    parser = Tables()
    parser.feed(page.read_text())
    head, *body = parser.sections["toy"]
    assert head == ["target", "rows", "n", "rows/s"]
    assert [(r[0], r[1], r[2]) for r in body] == [
        (str(target), "10", "2"),
        (str(target), "1000", "2"),
    ]
    assert all(r[3] not in ("", "–") for r in body)
    if chromium_path() is not None:  # as a person opens it
        with Chromium() as browser:
            seen = browser.open(
                page.resolve().as_uri(), "document.readyState === 'complete'"
            )  # no chart, so no script of the report's: the page itself is all there is
            cells = browser.evaluate(
                "Array.from(document.querySelectorAll('#toy tbody tr'))"
                ".map(tr => Array.from(tr.cells).map(c => c.textContent.trim()))"
            )
            assert seen.exceptions == [] and seen.console_errors == []
        assert [c[1:3] for c in cells] == [["10", "2"], ["1000", "2"]]

    # export prometheus: the family the toy declares, labelled by rows.
    prom = tmp_path / "toy.prom"
    exported = howfast("export", "prometheus", run_id, "-o", str(prom))
    assert exported.returncode == 0, exported.stderr
    lines = [x for x in prom.read_text().splitlines() if x.startswith("howfast_step_toy_rows")]
    assert len(lines) == 4 and sum('mode="1000 rows"' in x for x in lines) == 2, lines

    # Without the distribution, the run still reads: its steps as stored, nothing derived.
    bare = Howfast(howfast.store, howfast.workdir, None)
    stored = bare("results", "show", run_id, "--json")
    assert stored.returncode == 0, stored.stderr
    plain = json.loads(stored.stdout)["steps"]
    assert [s["workload"] for s in plain] == ["toy"] * 4
    assert all("toy_rows_per_s" not in s["metrics"] for s in plain)
    assert [s["metrics"]["toy_query_ms"] for s in plain] == [
        s["metrics"]["toy_query_ms"] for s in steps
    ]


def test_the_toy_s_own_parts_are_pure() -> None:
    # What the run above relies on, without a server: psql's output parsed, a derivation
    # that says when fewer sums were timed than asked.
    from howfast.analysis.hooks import DeriveContext
    from howfast.model import StepRecord
    from tests.toy_workload.analysis import ANALYSIS
    from tests.toy_workload.workload import parse, script

    assert script(3, 2) == "\\timing on\n" + "SELECT sum(g) FROM generate_series(1, 3) g;\n" * 2
    assert parse("6\nTime: 0.250 ms\n6\nTime: 0.750 ms\n") == ([0.25, 0.75], [6, 6])
    step = StepRecord("/a", "toy", {"rows": 1000, "queries": 5}, "completed", "", "",
                      metrics={"toy_query_ms": 0.5, "toy_timed_queries": 3})  # fmt: skip
    derived = ANALYSIS.derive_step(step, [], DeriveContext())
    assert derived.metrics == {"toy_rows_per_s": 2_000_000.0}
    assert derived.warnings == ("only 3 of the 5 sums were timed",)
    failed = StepRecord("/a", "toy", {"rows": 10, "queries": 5}, "failed", "", "")
    assert ANALYSIS.derive_step(failed, [], DeriveContext()).metrics == {}
