"""The terminal tables of what the samplers saw."""

from __future__ import annotations

import io

from rich.console import Console, Group

from howfast.model import RunRecord, StepRecord, TargetRecord
from howfast.report.io_tables import io_parts, step_label


def step(params: dict, sections: dict, metrics: dict | None = None) -> StepRecord:
    return StepRecord(
        target="/mnt/data",
        workload="pgbench",
        params=params,
        status="completed",
        started_at="",
        finished_at="",
        metrics=metrics or {},
        sections=sections,
    )


def summary(mbps: float) -> dict:
    return {
        "write_mbps": mbps,
        "write_iops": 1200.0,
        "avg_write_kib": 9.6,
        "util_pct": 44.0,
        "write_peak_to_mean": 3.2,
        "write_pattern": "random",
    }


SAMPLED = step(
    {"mode": "tpcb-like", "clients": 8, "settings": {"checkpoint_completion_target": "0.5"}},
    {
        "io": {
            "roles": {
                "data": {"device": "loop0", "summary": summary(10.78)},
                "wal": {"device": "loop1", "summary": summary(20.45)},
            }
        },
        "cpu": {},
        "postgres": {},
    },
    {
        "checkpoints": 3,
        "tps_during_checkpoints": 1408.3,
        "tps_outside_checkpoints": 1375.8,
        "wal_bytes": 88682992,
        "io_write_amplification": 2.86,
        "cache_hit_ratio": 0.9814,
        "cpu_user_pct": 40.0,
        "cpu_system_pct": 38.0,
        "cpu_iowait_pct": 9.0,
        "pgbench_cpu_pct": 24.0,
    },
)
ONE_DISK = {
    "data": {"device": "vda", "summary": summary(1.0)},
    "wal": {"device": "vda", "same_device_as": "data"},
}
SHARED = step({"mode": "select-only", "clients": 1, "repetition": 2}, {"io": {"roles": ONE_DISK}})


def render(run: RunRecord) -> str:
    out = io.StringIO()
    Console(file=out, width=200).print(Group(*io_parts(run)))
    return out.getvalue()


def run(*steps: StepRecord) -> RunRecord:
    target = TargetRecord(name="/mnt/data", kind="local")
    return RunRecord(1, "checkpoints", "completed", "", None, {}, [target], list(steps))


def test_labels_name_the_step_its_settings_and_repetition() -> None:
    assert step_label(SAMPLED) == "pgbench tpcb-like 8c checkpoint_completion_target=0.5"
    assert step_label(SHARED) == "pgbench select-only 1c #2"


def test_one_row_per_device_and_the_checkpoint_summary() -> None:
    text = render(run(SAMPLED, SHARED))
    assert "/mnt/data — what the samplers saw" in text
    assert "data (loop0)" in text and "wal (loop1)" in text
    assert "20.45" in text and "10.78" in text
    assert "data+wal (vda)" in text  # one device, both roles: one row that says so
    assert "1408.3 / 1375.8" in text
    assert "88.7" in text and "2.86" in text and "98.14" in text and "40/38/9" in text


def test_nothing_when_no_step_was_sampled() -> None:
    assert io_parts(run(step({"scale": 1}, {}))) == []
