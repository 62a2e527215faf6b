"""The step analysis: per-role figures, burstiness, access pattern, write amplification,
checkpoints and TPS around them, cache hit ratio, and the warnings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from howfast.analysis.io import (
    analyze_step,
    burstiness,
    pattern,
    sequential_score,
    tps_split,
    write_amplification,
)
from howfast.model import Sample
from howfast.samplers.diskstats import counter_delta, parse_diskstats

PROC = Path(__file__).parent.parent / "data" / "proc"


def recorded_delta(device: str) -> dict[str, int]:
    before = parse_diskstats((PROC / "diskstats-recorded-1.txt").read_text())[device]
    after = parse_diskstats((PROC / "diskstats-recorded-2.txt").read_text())[device]
    return counter_delta(before, after)


def points(*values: float) -> list[Sample]:
    return [Sample(float(i + 1), v) for i, v in enumerate(values)]


def sections(**postgres: Any) -> dict[str, Any]:
    return {
        "io": {
            "roles": {
                "data": {"device": "loop0", "seconds": 1.0, "delta": recorded_delta("loop0")},
                "wal": {"device": "loop1", "seconds": 1.0, "delta": recorded_delta("loop1")},
            }
        },
        "cpu": {"user_pct": 50.0, "system_pct": 39.9, "iowait_pct": 3.0, "steal_pct": 4.5},
        "postgres": {"views": {}, "wal_bytes": 7376608, **postgres},
    }


def test_burstiness_peak_over_mean_and_coefficient_of_variation() -> None:
    peak, cv = burstiness(points(10, 10, 10, 50))
    assert peak == pytest.approx(50 / 20)
    assert cv == pytest.approx(17.3205 / 20, rel=1e-4)
    assert burstiness(points(5, 5, 5)) == (1.0, 0.0)  # steady
    assert burstiness(points(0, 0)) == (None, None)
    assert burstiness(points(3)) == (None, None)


def test_sequential_estimate_from_request_size_and_merges() -> None:
    assert sequential_score(8.0, 0.0) == 0.0
    assert sequential_score(4.0, None) == 0.0  # below a page counts as a page
    assert sequential_score(32.0, 0.0) == pytest.approx(0.5)
    assert sequential_score(512.0, 0.0) == 1.0
    assert sequential_score(8.0, 0.9) == 0.9  # small requests the kernel merged
    assert sequential_score(None, 0.5) is None
    assert [pattern(s) for s in (0.0, 0.3, 0.5, None)] == ["random", "mixed", "sequential", None]


def test_per_role_figures_become_metrics() -> None:
    out = analyze_step(sections(), {}, 10.0)
    m = out.metrics
    assert m["io_wal_write_iops"] == 1056.0
    assert m["io_wal_write_bytes"] == 11657216
    assert m["io_wal_avg_write_kib"] == 10.8
    assert m["io_wal_write_await_ms"] == 0.529
    assert m["io_wal_queue_depth"] == 0.975
    assert m["io_wal_util_pct"] == 56.4
    assert m["io_data_write_iops"] == 469.0
    assert m["io_data_read_bytes"] == 0
    wal = out.sections["io"]["roles"]["wal"]["summary"]
    assert wal["write_pattern"] == "random"  # one-page synchronous flushes
    assert wal["flushes_per_s"] == 531.0


def test_write_amplification_counts_every_sampled_device() -> None:
    out = analyze_step(sections(), {}, 10.0)
    device_bytes = 11657216 + 6232064
    assert out.sections["io"]["device_write_bytes"] == device_bytes
    assert out.metrics["io_write_amplification"] == pytest.approx(device_bytes / 7376608, abs=1e-3)
    assert write_amplification(device_bytes, 1000) is None  # too little WAL to mean anything
    assert write_amplification(-1, 7376608) is None  # a role on tmpfs: unknown


def test_burstiness_of_each_role_from_its_series() -> None:
    series = {"io.data.write_mbps": points(1, 1, 1, 9), "io.wal.write_mbps": points(4, 4, 4, 4)}
    m = analyze_step(sections(), series, 10.0).metrics
    assert m["io_data_write_peak_to_mean"] == 3.0
    assert m["io_wal_write_peak_to_mean"] == 1.0 and m["io_wal_write_cv"] == 0.0


def test_tps_during_checkpoints_and_outside() -> None:
    tps = points(100, 100, 60, 60, 100, 100)  # seconds (0,1] ... (5,6]
    during, outside = tps_split(tps, [(2.2, 3.9)])
    assert during == 60 and outside == 100
    assert tps_split(tps, []) == (None, pytest.approx(520 / 6))


def test_checkpoints_from_the_log_with_tps_around_them() -> None:
    events = [
        {"kind": "checkpoint", "reason": "wal", "start_t": 2.2, "end_t": 3.9, "buffers": 10},
        {"kind": "checkpoint", "reason": "time", "start_t": 70.0, "end_t": None},
    ]
    slow = {3, 4, *range(71, 80)}
    tps = {"tps": [Sample(float(t), 60.0 if t in slow else 100.0) for t in range(1, 80)]}
    out = analyze_step(sections(checkpoints=events), tps, 79.0)
    assert out.metrics["checkpoints"] == 2
    assert out.metrics["tps_during_checkpoints"] == 60.0
    assert out.metrics["tps_outside_checkpoints"] == 100.0
    assert out.sections["postgres"]["checkpoints_source"] == "server log"
    assert out.warnings == []  # 79 s: long enough


def test_a_checkpoint_in_a_short_step_is_a_warning() -> None:
    events = [{"kind": "checkpoint", "reason": "wal", "start_t": 1.0, "end_t": 2.0}]
    out = analyze_step(sections(checkpoints=events), {}, 10.0)
    assert len(out.warnings) == 1
    assert "checkpoint (wal) ran during this 10 s step" in out.warnings[0]
    assert analyze_step(sections(checkpoints=[]), {}, 10.0).warnings == []


def test_without_the_log_checkpoints_come_from_the_statistics() -> None:
    views = {"pg_stat_checkpointer": {"num_timed": 1, "num_requested": 2}}
    out = analyze_step(sections(views=views), {}, 30.0)
    assert out.metrics["checkpoints"] == 3
    assert out.sections["postgres"]["checkpoints_source"] == "statistics views"
    assert "tps_during_checkpoints" not in out.metrics
    assert len(out.warnings) == 1


def test_cache_hit_ratio_and_wal_figures() -> None:
    views = {
        "pg_stat_database": {"blks_hit": 990, "blks_read": 10},
        "pg_stat_wal": {"wal_records": 5, "wal_fpi": 1, "wal_bytes": 900},
    }
    m = analyze_step(sections(views=views), {}, 30.0).metrics
    assert m["cache_hit_ratio"] == 0.99
    assert (m["wal_records"], m["wal_fpi"], m["wal_bytes"]) == (5, 1, 7376608)
    idle = {"pg_stat_database": {"blks_hit": 0, "blks_read": 0}}
    none = analyze_step(sections(views=idle), {}, 1)
    assert "cache_hit_ratio" not in none.metrics


def test_a_busy_load_generator_is_a_warning() -> None:
    s = sections()
    s["cpu"]["load_generator"] = {"cpu_pct": 180.0, "busiest_thread_pct": 96.0, "threads": 2}
    out = analyze_step(s, {}, 30.0)
    assert out.metrics["pgbench_cpu_pct"] == 180.0
    assert out.metrics["pgbench_thread_cpu_max_pct"] == 96.0
    assert out.metrics["cpu_user_pct"] == 50.0
    [warning] = out.warnings
    assert "pgbench used 96% of a CPU core" in warning and "load generator" in warning
    s["cpu"]["load_generator"]["busiest_thread_pct"] = 80.0
    assert analyze_step(s, {}, 30.0).warnings == []


def test_a_shared_device_is_counted_once_and_tmpfs_makes_amplification_unknown() -> None:
    s = sections()
    s["io"]["roles"]["wal"] = {"device": "loop0", "same_device_as": "data"}
    out = analyze_step(s, {}, 10.0)
    assert not any(name.startswith("io_wal_") for name in out.metrics)
    assert out.sections["io"]["device_write_bytes"] == 6232064
    s["io"]["roles"]["wal"] = {"device": None, "note": "no block device (tmpfs)"}
    out = analyze_step(s, {}, 10.0)
    assert "io_write_amplification" not in out.metrics
    assert "device_write_bytes" not in out.sections["io"]


def test_an_existing_server_has_no_io_section_figures() -> None:
    out = analyze_step({"io": {"roles": {}}, "postgres": {"views": {}}}, {}, 10.0)
    assert not any(name.startswith("io_") for name in out.metrics)
