"""Runs written with the Store API for the statistics, compare and report tests: records as the
runner would store them, with known values so that every figure can be checked by hand."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from howfast.model import JSONValue, Sample, StepRecord, TargetRecord
from howfast.store import SqlStore, open_store

ENVIRONMENT: dict[str, JSONValue] = {
    "hostname": "bench1",
    "kernel": "6.1.0-26-amd64",
    "cpu_model": "AMD EPYC 7B13",
    "cpu_count": 8,
    "memory_bytes": 32 << 30,
}
DEVICE: dict[str, JSONValue] = {
    "data": {
        "fstype": "ext4",
        "mount_options": "rw,relatime",
        "source": "/dev/nvme0n1p2",
        "device": {"name": "nvme0n1p2", "disk": "nvme0n1", "rotational": False},
    },
    "wal_on_data_device": True,
}
SETTINGS = {"shared_buffers": "1GB", "synchronous_commit": "on", "port": "5432"}
STARTED = "2026-01-01T10:00:00+00:00"


def pgbench(
    target: str,
    tps: float,
    clients: int = 4,
    repetition: int = 1,
    per_second: Sequence[float] | None = None,
    warnings: Sequence[str] = (),
    **params: JSONValue,
) -> StepRecord:
    """A pgbench step whose latency follows from its TPS (clients / TPS), as in a closed loop."""
    latency = clients * 1000.0 / tps
    step_params: dict[str, JSONValue] = {
        "mode": "tpcb-like",
        "clients": clients,
        "jobs": clients,
        "duration_s": 60,
        "scale": 10,
        **params,
    }
    if repetition > 1:
        step_params["repetition"] = repetition
    series: dict[str, list[Sample]] = {}
    if per_second is not None:
        series["tps"] = [Sample(float(t), v) for t, v in enumerate(per_second, start=1)]
        series["latency_ms"] = [
            Sample(float(t), clients * 1000.0 / v) for t, v in enumerate(per_second, start=1)
        ]
    return StepRecord(
        target=target,
        workload="pgbench",
        params=step_params,
        status="completed",
        started_at=STARTED,
        finished_at=STARTED,
        metrics={
            "tps": tps,
            "latency_avg_ms": latency,
            "latency_p50_ms": latency * 0.9,
            "latency_p95_ms": latency * 2,
            "latency_p99_ms": latency * 3,
            "conn_time_ms": 5.0,
        },
        warnings=list(warnings),
        series=series,
    )


def init(target: str, total_s: float) -> StepRecord:
    return StepRecord(
        target=target,
        workload="pgbench-init",
        params={"scale": 10, "generate": "client", "fillfactor": 100, "partitions": 0},
        status="completed",
        started_at=STARTED,
        finished_at=STARTED,
        metrics={
            "init_total_s": total_s,
            "drop_s": 0.01,
            "create_s": 0.02,
            "generate_s": total_s * 0.6,
            "vacuum_s": total_s * 0.2,
            "primary_keys_s": total_s * 0.2 - 0.03,
            "db_size_bytes": 160 << 20,
        },
    )


def fio(target: str, profile: str, **metrics: float) -> StepRecord:
    return StepRecord(
        target=target,
        workload="fio",
        params={"profile": profile, "size_bytes": 64 << 20, "runtime_s": 10},
        status="completed",
        started_at=STARTED,
        finished_at=STARTED,
        metrics=dict(metrics),
    )


def store_run(
    db: SqlStore,
    steps: Sequence[StepRecord],
    targets: Sequence[str] = ("/mnt/a",),
    environment: dict[str, JSONValue] | None = None,
    settings: dict[str, str] | None = None,
    label: str | None = None,
) -> int:
    run_id = db.create_run("sweep", environment or ENVIRONMENT, STARTED, label=label)
    for name in targets:
        record = TargetRecord(name, "local", "16.4", dict(settings or SETTINGS), DEVICE, name)
        db.add_target(run_id, record)
    for step in steps:
        db.add_step(run_id, step)
    db.finish_run(run_id, "completed", "2026-01-01T10:30:00+00:00")
    return run_id


def open_temp_store(tmp_path: Path) -> SqlStore:
    return open_store(str(tmp_path / "results.db"))
