"""Regime warnings: an on-disk step that read nothing from the device, an in-memory one that
read much of the database; and the data a step records from the target's latest load."""

from __future__ import annotations

from howfast.analysis.working_set import PAGE_BYTES, os_read_bytes, regime_warnings
from howfast.model import StepRecord
from howfast.workloads.base import LoadedData

GIB = 1024**3
MIB = 1024**2


def sections(blks_read: int | None) -> dict[str, object]:
    if blks_read is None:
        return {}
    return {"postgres": {"views": {"pg_stat_database": {"blks_read": blks_read}}}}


def test_on_disk_step_served_from_memory_is_flagged():
    metrics = {"io_data_read_bytes": 0, "cache_hit_ratio": 0.91}
    got = regime_warnings("on-disk", 4 * GIB, metrics, sections(100_000))
    assert len(got) == 1 and "read (almost) nothing" in got[0] and "0.910" in got[0]
    # Everything in shared_buffers (nothing read through the OS either) is flagged too.
    assert regime_warnings("on-disk", 4 * GIB, {"io_data_read_bytes": 0}, sections(0))


def test_on_disk_step_on_slow_storage_is_not_flagged():
    # 20 MiB read of a 4 GiB database is under 1%, but it is what PostgreSQL asked the OS for.
    metrics = {"io_data_read_bytes": 20 * MIB}
    assert regime_warnings("on-disk", 4 * GIB, metrics, sections(20 * MIB // PAGE_BYTES)) == []
    # Over 1% of the database: never flagged, whatever the views say.
    assert regime_warnings("on-disk", 4 * GIB, {"io_data_read_bytes": 50 * MIB}, {}) == []
    # Without the views, the 1% rule alone decides.
    assert regime_warnings("on-disk", 4 * GIB, {"io_data_read_bytes": 20 * MIB}, {})


def test_in_memory_and_in_buffers_steps_that_read_much_are_flagged():
    metrics = {"io_data_read_bytes": 60 * MIB}
    for regime in ("in-memory", "in-buffers"):
        got = regime_warnings(regime, 300 * MIB, metrics, {})
        assert len(got) == 1 and f"an {regime} step read 60.0 MiB" in got[0] and "20%" in got[0]
    assert regime_warnings("in-memory", 300 * MIB, {"io_data_read_bytes": 29 * MIB}, {}) == []


def test_no_verdict_without_a_visible_device_or_a_regime():
    assert regime_warnings("on-disk", 4 * GIB, {"cache_hit_ratio": 1.0}, {}) == []
    assert regime_warnings(None, 4 * GIB, {"io_data_read_bytes": 0}, {}) == []
    assert regime_warnings("20GiB", 20 * GIB, {"io_data_read_bytes": 0}, {}) == []
    assert regime_warnings("on-disk", None, {"io_data_read_bytes": 0}, {}) == []
    assert os_read_bytes({"postgres": {"views": {}}}) is None
    assert os_read_bytes(sections(3)) == 3 * PAGE_BYTES


def record(workload: str, status: str, params: dict[str, object], **metrics: object) -> StepRecord:
    return StepRecord(
        target="t",
        workload=workload,
        params=dict(params),
        status=status,  # type: ignore[arg-type]
        started_at="",
        finished_at="",
        metrics=dict(metrics),
    )


def test_loaded_data_is_the_latest_completed_load():
    first = record("pgbench-init", "completed", {"scale": 10}, db_size_bytes=150 * MIB)
    sized = record(
        "pgbench-init", "completed", {"scale": 64, "dataset": "on-disk"}, db_size_bytes=GIB
    )
    bench = record("pgbench", "completed", {"scale": 10})
    assert LoadedData.last_on([]) is None
    assert LoadedData.last_on([first, bench]) == LoadedData(10, 150 * MIB, None)
    loaded = LoadedData.last_on([first, bench, sized, bench])
    assert loaded == LoadedData(64, GIB, "on-disk")
    assert loaded.params() == {"scale": 64, "dataset": "on-disk"}
    # A failed load leaves nothing known to be loaded (pgbench -i drops the tables first).
    failed = record("pgbench-init", "failed", {"scale": 99})
    assert LoadedData.last_on([sized, failed]) is None
