"""What each metric is: a readable name, its unit, and which way is better.

Statistics, comparisons and reports share this catalogue so that every figure carries its unit
and a comparison knows whether a higher value is an improvement.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str
    # True: more is better (TPS, IOPS); False: less is better (latency, time); None: neither.
    higher_is_better: bool | None
    digits: int = 2  # decimals worth printing in this unit


def _m(name: str, label: str, unit: str, higher: bool | None, digits: int) -> Metric:
    return Metric(name, label, unit, higher, digits)


_ALL = [
    # pgbench
    _m("tps", "TPS", "tx/s", True, 1),
    _m("steady_tps", "steady TPS", "tx/s", True, 1),
    _m("latency_avg_ms", "avg latency", "ms", False, 3),
    _m("steady_latency_avg_ms", "steady avg latency", "ms", False, 3),
    _m("latency_p50_ms", "p50 latency", "ms", False, 3),
    _m("latency_p90_ms", "p90 latency", "ms", False, 3),
    _m("latency_p95_ms", "p95 latency", "ms", False, 3),
    _m("latency_p99_ms", "p99 latency", "ms", False, 3),
    _m("latency_p999_ms", "p99.9 latency", "ms", False, 3),
    _m("latency_max_ms", "max latency", "ms", False, 3),
    _m("conn_time_ms", "connection time", "ms", False, 2),
    # pgbench-init
    _m("init_total_s", "load time", "s", False, 2),
    _m("drop_s", "drop", "s", False, 2),
    _m("create_s", "create", "s", False, 2),
    _m("generate_s", "generate", "s", False, 2),
    _m("vacuum_s", "vacuum", "s", False, 2),
    _m("primary_keys_s", "primary keys", "s", False, 2),
    _m("db_size_bytes", "database size", "bytes", None, 0),
    # fio
    _m("read_iops", "read IOPS", "IOPS", True, 0),
    _m("write_iops", "write IOPS", "IOPS", True, 0),
    _m("read_mbps", "read MB/s", "MB/s", True, 1),
    _m("write_mbps", "write MB/s", "MB/s", True, 1),
    _m("read_lat_avg_ms", "read latency avg", "ms", False, 3),
    _m("read_lat_p99_ms", "read latency p99", "ms", False, 3),
    _m("write_lat_avg_ms", "write latency avg", "ms", False, 3),
    _m("write_lat_p99_ms", "write latency p99", "ms", False, 3),
    _m("sync_lat_avg_ms", "sync latency avg", "ms", False, 3),
    _m("sync_lat_p99_ms", "sync latency p99", "ms", False, 3),
    _m("commit_ceiling_tps", "commit ceiling", "commits/s", True, 0),
    # pg_test_fsync
    _m("fdatasync_ops_s", "fdatasync", "ops/s", True, 0),
]
METRICS: dict[str, Metric] = {m.name: m for m in _ALL}

# What every fio profile reports: throughput, and average and p99 latency per direction.
FIO_FIGURES = (
    "read_iops",
    "write_iops",
    "read_mbps",
    "write_mbps",
    "read_lat_avg_ms",
    "read_lat_p99_ms",
    "write_lat_avg_ms",
    "write_lat_p99_ms",
    "sync_lat_avg_ms",
    "sync_lat_p99_ms",
)

# The metrics summarised over repetitions and compared, per workload, in this order. The
# steady_* ones come from the per-second series (analysis/steady.py), not from the tool.
KEY_METRICS: dict[str, tuple[str, ...]] = {
    "pgbench": (
        "tps",
        "steady_tps",
        "latency_avg_ms",
        "steady_latency_avg_ms",
        "latency_p50_ms",
        "latency_p95_ms",
        "latency_p99_ms",
        "conn_time_ms",
    ),
    "pgbench-init": (
        "init_total_s",
        "drop_s",
        "create_s",
        "generate_s",
        "vacuum_s",
        "primary_keys_s",
        "db_size_bytes",
    ),
    "fio": (*FIO_FIGURES, "commit_ceiling_tps"),
    "pg_test_fsync": ("fdatasync_ops_s",),
}
# The few figures people quote, for views with little room (the terminal's compare).
HEADLINE_METRICS: dict[str, tuple[str, ...]] = {
    "pgbench": ("tps", "steady_tps", "latency_avg_ms", "latency_p99_ms"),
    "pgbench-init": ("init_total_s",),
    "fio": ("read_iops", "write_iops", "read_lat_avg_ms", "write_lat_avg_ms", "sync_lat_avg_ms"),
    "pg_test_fsync": ("fdatasync_ops_s",),
}
# pgbench-init phases in the order pgbench runs them.
INIT_PHASES = ("drop_s", "create_s", "generate_s", "vacuum_s", "primary_keys_s")


def metric(name: str) -> Metric:
    """The catalogue entry, or a neutral one for a metric it does not know."""
    return METRICS.get(name) or Metric(name, name, "", None, 2)


def with_unit(name: str) -> str:
    """'TPS (tx/s)', 'p99 latency (ms)'."""
    m = metric(name)
    # A label that names its unit ('read IOPS') has it already; sizes print their own (MiB).
    if not m.unit or m.unit == "bytes" or m.unit in m.label.split():
        return m.label
    return f"{m.label} ({m.unit})"
