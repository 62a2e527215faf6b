"""The four numbers per target (analysis/regimes.py) and their table, and how a sized load
records itself (workloads/pgbench/dataset.py)."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console

from howfast.analysis.regimes import regimes_rows
from howfast.machine.memory import MemoryBasis
from howfast.model import RunRecord, StepRecord, TargetRecord
from howfast.report.regimes_table import regimes_parts, row_notes
from howfast.sizing import plan_dataset
from howfast.workloads.base import StepOutcome
from howfast.workloads.pgbench.dataset import Sizing, finish, wanted

MIB = 1024**2


def step(target: str, workload: str, params: dict[str, object], **metrics: object) -> StepRecord:
    status = metrics.pop("status", "completed")
    return StepRecord(
        target=target,
        workload=workload,
        params=dict(params),
        status=status,  # type: ignore[arg-type]
        started_at="",
        finished_at="",
        metrics=dict(metrics),
    )


def tpcb(target: str, dataset: str, tps: float, status: str = "completed", **extra: object):
    params = {"mode": "tpcb-like", "clients": 8, "duration_s": 60, "scale": 40, **extra}
    return step(target, "pgbench", {**params, "dataset": dataset}, tps=tps, status=status)


def regimes_run() -> RunRecord:
    on_disk = {"dataset": "on-disk", "scale": 270, "memory_bytes": 1024 * MIB}
    load = {"init_total_s": 95.5, "generate_s": 60.0, "vacuum_s": 10.5, "primary_keys_s": 25.0}
    cold = {"seqread_s": 12.0, "seqread_mbps": 300.0, "table_bytes": 3500 * MIB}
    select = {"mode": "select-only", "clients": 8, "dataset": "in-memory"}
    steps = [
        step(
            "/a",
            "pgbench-init",
            {**on_disk, "memory_basis": "--memory"},
            **load,
            db_size_bytes=4096 * MIB,
            sizing_ms=900.0,
        ),
        step("/a", "seqread", {"cold": True}, **cold, cache_cold=True),
        step("/a", "seqread", {"cold": False}, seqread_s=1.0, cache_cold=False),
        tpcb("/a", "on-disk", 500.0, warmup=True),
        tpcb("/a", "on-disk", 900.0),
        tpcb("/a", "on-disk", 1100.0),
        tpcb("/a", "on-disk", 100.0, rate=100),  # a fixed rate says nothing of capacity
        tpcb("/a", "on-disk", 9000.0, clients=1),  # the largest client count is shown
        step("/a", "pgbench-init", {"dataset": "in-memory", "scale": 22}, init_total_s=5.0),
        tpcb("/a", "in-memory", 4000.0),
        step("/a", "pgbench", select, tps=50000.0),
        # A second target where only part of it ran.
        step("/b", "pgbench-init", {"scale": 10}, init_total_s=3.0),
        tpcb("/b", "in-memory", 2000.0, status="failed"),
    ]
    return RunRecord(
        id=1,
        plan="regimes",
        status="failed",
        started_at="",
        finished_at=None,
        environment={},
        targets=[TargetRecord("/a", "local"), TargetRecord("/b", "local")],
        steps=steps,
    )


def test_rows_hold_the_four_numbers_and_what_they_stand_on():
    a, b = regimes_rows(regimes_run())
    assert a.target == "/a" and a.complete_enough()
    assert a.on_disk_tps == 1000.0  # mean of the two full-speed runs at 8 clients
    assert a.tps["on-disk"].runs == 2 and a.tps["on-disk"].clients == 8
    assert a.in_memory_tps == 4000.0 and a.tps["in-memory"].mode == "tpcb-like"
    assert a.load is not None and a.load.seconds == 95.5 and a.load.scale == 270
    assert a.load.phases == {"generate": 60.0, "vacuum": 10.5, "primary_keys": 25.0}
    assert a.read is not None and a.read.seconds == 12.0 and a.read.cold is True
    assert a.read.runs == 1  # the warm read is not the large read time
    # /b: a plain load, no regime figures.
    assert b.load is not None and b.load.seconds == 3.0 and b.load.dataset is None
    assert b.tps == {} and b.read is None and not b.complete_enough()


def test_table_and_notes_render():
    run = regimes_run()
    console = Console(file=io.StringIO(), width=140)
    for part in regimes_parts(run):
        console.print(part)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "in-memory TPS" in text and "large read s" in text
    assert "4,000.0" in text and "1,000.0" in text and "95.50" in text and "12.00" in text
    notes = row_notes(regimes_rows(run)[0])
    assert "on-disk TPS: pgbench tpcb-like, 8 clients, scale 40, mean of 2 runs" in notes
    assert any("sized for 1.00 GiB of memory (--memory)" in n for n in notes)
    assert any(n.startswith("large read: 3.42 GiB table at 300.0 MB/s, cold") for n in notes)


def test_no_table_without_regime_figures():
    run = regimes_run()
    run = replace(run, steps=[s for s in run.steps if s.target == "/b"])
    assert regimes_parts(run) == []


def test_a_sized_load_records_scale_sizes_and_basis():
    plan = plan_dataset(
        "on-disk",
        memory_bytes=64 * MIB,
        shared_buffers_bytes=16 * MIB,
        bytes_per_scale=15 * MIB,
        base_bytes=7 * MIB,
    )
    sizing = Sizing("on-disk", plan, MemoryBasis(64 * MIB, "--memory"), 0.25)
    outcome = finish(StepOutcome(metrics={"db_size_bytes": 300 * MIB}), sizing)
    assert outcome.resolved_params == {
        "scale": plan.scale,
        "regime": "on-disk",
        "memory_bytes": 64 * MIB,
        "memory_basis": "--memory",
    }
    m = outcome.metrics
    assert m["dataset_target_bytes"] == 256 * MIB
    assert m["dataset_expected_bytes"] == plan.expected_bytes == 7 * MIB + plan.scale * 15 * MIB
    assert m["dataset_base_bytes"] == 7 * MIB and m["sizing_ms"] == 250.0
    # 300 MiB loaded where 262 MiB were expected: more than 10% off, said so.
    assert any("off the" in w for w in outcome.warnings)
    assert finish(StepOutcome(), None) == StepOutcome()
    assert wanted({"dataset": "on-disk"}) and not wanted({"dataset": "on-disk", "scale": 3})
    assert not wanted({"scale": 3})
