"""Golden report outlines: what the HTML and Markdown reports of a fixed set of runs hold
(sections, tables cell by cell, charts trace by trace), recorded in tests/data/outlines/ so
that a change that should change no report proves it. The HTML page itself adds only its
format (and plotly), which these runs do not change.

The runs are tests/unit/goldens.py's cases, and two more for the workloads those do not
have: a storage probe with pg_test_fsync, a seqread and a workload this howfast does not know,
and the regimes run. Regenerate on purpose, read the diff, commit it with the change:

    .venv/bin/python -m tests.unit.report_outlines write
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from howfast.analysis.overview import overview
from howfast.model import JSONValue, StepRecord
from howfast.report import document
from howfast.report.outline import ReportDocument
from howfast.report.output import series_to_read
from howfast.report.tables import Table
from howfast.service.reading import read_run, read_runs
from howfast.store import SqlStore, open_store
from tests.unit import goldens
from tests.unit.stored_runs import ENVIRONMENT, STARTED, fio, init, pgbench, store_run
from tests.unit.test_regimes_analysis import regimes_run

DATA = goldens.DATA
OUTLINE_DIR = DATA / "outlines"
FSYNC_OUTPUT = DATA / "pg_test_fsync" / "pg15_ext4_real.txt"


def probe_and_more(db: SqlStore) -> int:
    """pg_test_fsync (one completed, one failed) beside fio and pgbench at 1 client, a seqread,
    and a step of a workload this howfast does not know."""
    from howfast.workloads.pg_test_fsync import parse

    metrics: dict[str, JSONValue] = dict(parse.metrics(parse.parse(FSYNC_OUTPUT.read_text())))

    def step(
        workload: str, params: dict[str, JSONValue], status: str = "completed", **kw: object
    ) -> StepRecord:
        return StepRecord("/mnt/a", workload, params, status, STARTED, STARTED, **kw)  # type: ignore[arg-type]

    steps = [
        step("pg_test_fsync", {"seconds": 2}, metrics=metrics, resolved={"pg_version": "16.4"}),
        step("pg_test_fsync", {"seconds": 2}, status="failed", error="pg_test_fsync exited 1"),
        fio("/mnt/a", "wal-fsync", write_iops=900.0, write_lat_avg_ms=0.05, sync_lat_avg_ms=1.0),
        fio("/mnt/a", "rand-read-4k-qd64", read_iops=45000.0, read_mbps=175.8),
        init("/mnt/a", 4.0),
        pgbench("/mnt/a", 300.0, clients=1),
        pgbench("/mnt/a", 320.0, clients=1, repetition=2),
        step(
            "seqread",
            {"cold": True, "parallel": False, "scale": 10},
            metrics={
                "seqread_s": 3.0,
                "seqread_mbps": 200.0,
                "table_bytes": 600 << 20,
                "cache_cold": True,
            },
        ),
        step("mystery", {"knob": 3, "mode": "x"}, metrics={"x": 1.0}),
    ]
    return store_run(db, steps)


def regimes(db: SqlStore) -> int:
    run = regimes_run()
    run_id = db.create_run("regimes", ENVIRONMENT, STARTED)
    for target in run.targets:
        db.add_target(run_id, target)
    for s in run.steps:
        db.add_step(run_id, s)
    db.finish_run(run_id, "failed", "2026-01-01T10:30:00+00:00")
    return run_id


CASES: dict[str, Callable[[SqlStore], int]] = {
    **goldens.CASES,
    "probe-and-more": probe_and_more,
    "regimes": regimes,
}
# Reports of several runs: the comparison, and each workload's sections over runs.
SEVERAL = {
    "sweep+until": ("sweep", "until"),
    "rate-curve+sweep": ("rate-curve", "sweep"),
    "probe-and-more+sweep": ("probe-and-more", "sweep"),
    "imported-pgbench": (
        "import-pgbench-run-tpcb-pg15",
        "import-pgbench-run-select-only-pg15",
        "import-pgbench-multi-four-runs-pg15",
    ),
}


def _block(block: object) -> JSONValue:
    if isinstance(block, Table):
        return {
            "table": block.id,
            "title": block.title,
            "columns": block.columns,
            "rows": [[[c.text, list(c.notes), c.numeric] for c in row] for row in block.rows],
            "notes": block.notes,
        }
    if isinstance(block, str):
        return block
    return {"chart": dataclasses.asdict(block)}  # type: ignore[call-overload]


def outline_text(outline: ReportDocument) -> str:
    doc = {
        "title": outline.title,
        "subtitle": outline.subtitle,
        "sections": [
            {
                "id": s.id,
                "title": s.title,
                "level": s.level,
                "blocks": [_block(b) for b in s.blocks],
            }
            for s in outline.sections
        ],
    }
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def outlines() -> dict[str, str]:
    """Every case's outline, and the outlines of the reports of several runs, by name."""
    with tempfile.TemporaryDirectory() as tmp:
        db = open_store(str(Path(tmp) / "results.db"))
        try:
            ids = {name: make(db) for name, make in CASES.items()}
            found = {}
            for name, run_ids in [*((n, (n,)) for n in CASES), *SEVERAL.items()]:
                numbers = [ids[n] for n in run_ids]
                names = series_to_read(read_runs(db, numbers))  # as `howfast report` reads
                runs = read_runs(db, numbers, series=names, for_people=True)
                found[name] = outline_text(document.build(overview(runs)))
            assert read_run(db, ids["sweep"]) is not None
            return found
        finally:
            db.close()


def write() -> None:
    OUTLINE_DIR.mkdir(exist_ok=True)
    for name, text in outlines().items():
        (OUTLINE_DIR / f"{name}.json").write_text(text)
        print(f"wrote {(OUTLINE_DIR / name).relative_to(goldens.ROOT)}.json")


if __name__ == "__main__":
    if sys.argv[1:] != ["write"]:
        sys.exit(f"usage: {sys.executable} -m tests.unit.report_outlines write")
    write()
