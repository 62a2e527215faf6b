"""Issue 37: `run`, `results show` and the report print the WAL and data I/O of every
instance of a `cnpg://` target, from a real run's document (tests/data/runfiles/README.md:
the lab's Cluster lab/pg, a synchronous standby, WAL on a volume of its own of the same
class as the data, a tpcb-like step with the primary's pod deleted at 5 s)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console

from howfast.analysis import instance_io as ii
from howfast.analysis.overview import overview
from howfast.exports.runfile import parse_run_file
from howfast.model import RunRecord
from howfast.report import document, instance_io_view, terminal
from howfast.report.markdown import render_table
from howfast.report.tables import Table

RECORDED = Path(__file__).resolve().parents[1] / "data" / "runfiles" / "cnpg-delete-pod.json"


def _run() -> RunRecord:
    (exported,) = parse_run_file(RECORDED.read_text(), RECORDED.name)
    return exported.run


def _pgbench(run: RunRecord) -> Any:
    (step,) = [s for s in run.steps if s.workload == "pgbench"]
    return step


def _readings(section: Any) -> list[dict[str, Any]]:
    return list(section["pods"]) if "pods" in section else [section]


def _text(run: RunRecord) -> str:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(terminal.run_summary(run))
    return out.getvalue()


def test_every_instance_s_figures_are_the_recorded_counters_summed_over_its_pods() -> None:
    run = _run()
    step = _pgbench(run)
    stored = step.sections["io"]["instances"]
    rows = ii.instance_io_rows(run)
    assert [r.instance for r in rows] == sorted(stored) == ["pg-1", "pg-2"]
    for row in rows:
        readings = _readings(stored[row.instance])
        assert row.pods == len(readings)
        assert row.data is not None
        assert row.data.write_bytes == sum(r["roles"]["data"]["write_bytes"] for r in readings)
        assert row.data.read_bytes == sum(r["roles"]["data"]["read_bytes"] for r in readings)
        # lab/pg's WAL volume is of the data's class, a directory of the same disk: one device
        assert row.wal is None and row.wal_where == ii.WAL_SHARED_DEVICE
    assert sum(r.data.write_bytes for r in rows if r.data) > 0
    design = run.targets[0].device["cnpg"]
    assert isinstance(design, dict)
    assert [r.instance for r in rows if r.primary] == [design["primary"]]


def test_run_and_results_show_print_a_row_per_instance() -> None:
    run = _run()
    text = _text(run)
    assert instance_io_view.TITLE in text
    after = text[text.index(instance_io_view.TITLE) :]
    for row in ii.instance_io_rows(run):
        assert row.data is not None
        line = next(ln for ln in after.splitlines() if f" {row.instance}" in ln)
        assert f"{row.data.write_bytes / 1e6:,.1f}" in line, line
        assert ii.WAL_SHARED_DEVICE in line, line


def test_results_show_of_the_imported_run_prints_the_table(tmp_path: Path) -> None:
    env = {**os.environ, "HOWFAST_STORE": str(tmp_path / "store.db"), "COLUMNS": "200"}
    howfast = [sys.executable, "-m", "howfast"]
    subprocess.run([*howfast, "import", "run", str(RECORDED)], env=env, check=True,
                   capture_output=True)  # fmt: skip
    shown = subprocess.run([*howfast, "results", "show", "1"], env=env, check=True,
                           capture_output=True, text=True).stdout  # fmt: skip
    assert instance_io_view.TITLE in shown
    after = shown[shown.index(instance_io_view.TITLE) :]
    assert any(" pg-1" in ln for ln in after.splitlines())
    assert any(" pg-2" in ln for ln in after.splitlines())


def test_a_wal_volume_on_its_own_device_has_its_own_columns() -> None:
    """The recorded run's readings with a `wal` role added (a copy: the lab has no second
    disk), as the sampler stores it for a WAL volume on a device of its own."""
    run = _run()
    step = _pgbench(run)
    instances = step.sections["io"]["instances"]
    wal = {"read_bytes": 0, "write_bytes": 7_500_000, "read_ios": 0, "write_ios": 900}

    def with_wal(reading: dict[str, Any]) -> dict[str, Any]:
        return {**reading, "roles": {**reading["roles"], "wal": wal}}

    changed = {
        name: {"pods": [with_wal(r) for r in s["pods"]]} if "pods" in s else with_wal(s)
        for name, s in instances.items()
    }
    sections = {**step.sections, "io": {**step.sections["io"], "instances": changed}}
    run = replace(run, steps=[replace(s, sections=sections) if s is step else s for s in run.steps])
    for row in ii.instance_io_rows(run):
        assert row.wal is not None and row.wal_where == ii.WAL_OWN
        assert row.wal.write_bytes == 7_500_000 * row.pods
    line = next(ln for ln in _text(run).splitlines() if " pg-2" in ln and ii.WAL_OWN in ln)
    assert "7.5" in line or "15.0" in line, line


def test_an_instance_whose_pod_was_made_again_is_summed_over_its_pods() -> None:
    """pg-2's reading twice (a copy: as the sampler stores an instance whose pod the
    operator made again within the step), each counted once."""
    run = _run()
    step = _pgbench(run)
    instances = dict(step.sections["io"]["instances"])
    (once,) = _readings(instances["pg-2"])
    instances["pg-2"] = {"pods": [once, once]}
    sections = {**step.sections, "io": {**step.sections["io"], "instances": instances}}
    run = replace(run, steps=[replace(s, sections=sections) if s is step else s for s in run.steps])
    (row,) = [r for r in ii.instance_io_rows(run) if r.instance == "pg-2"]
    assert row.pods == 2 and row.data is not None
    assert row.data.write_bytes == 2 * once["roles"]["data"]["write_bytes"]
    assert row.data.seconds == round(2 * once["seconds"], 3)
    assert any("pg-2" in ln and ", 2 pods" in ln for ln in _text(run).splitlines())


def test_the_report_has_the_table_and_other_runs_do_not() -> None:
    run = _run()
    built = document.build(overview([run]))
    (section,) = [s for s in built.sections if s.id == f"instance-io-{run.id}"]
    (table,) = [b for b in section.blocks if isinstance(b, Table)]
    assert [row[2].text.split(" ")[0] for row in table.rows] == ["pg-1", "pg-2"]
    assert "| target |" in render_table(table)
    # a run of a target without instances: no table, no section
    plain = replace(run, steps=[replace(s, sections={}) for s in run.steps])
    assert instance_io_view.instance_io_parts(plain) == []
    assert instance_io_view.instance_io_table(plain) is None
