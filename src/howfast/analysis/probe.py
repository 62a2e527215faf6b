"""Storage probe results of one target: a row per fio profile, pg_test_fsync's sync methods,
and the commit-rate ceiling set against what PostgreSQL reached.

The ceiling: a commit of one connection waits for its WAL write and flush, one after the
other, so 1000 / (write + flush latency in ms) of the wal-fsync profile is the most commits per
second one connection can make on this storage. pgbench tpcb-like at 1 client is one
connection committing as fast as it can; its TPS over the ceiling says how much of what the
storage allows PostgreSQL gets (the rest goes to executing the transaction and round trips).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import fmean

from howfast.model import JSONValue, StepRecord
from howfast.walsync import WAL_SYNC_METHODS, commit_latency_ms, commit_rate_ceiling

WAL_PROFILE = "wal-fsync"
PROBE_WORKLOADS = ("fio", "pg_test_fsync")
# Above this share of the ceiling, PostgreSQL's commits cannot all have waited for a flush.
ABOVE_CEILING = 1.05


@dataclass(frozen=True)
class FioRow:
    """One fio step as a table row. Latencies in ms; MB/s is read + write."""

    profile: str
    repetition: int | None
    status: str
    error: str | None
    read_iops: float | None
    write_iops: float | None
    mbps: float | None
    read_lat_avg_ms: float | None
    read_lat_p99_ms: float | None
    write_lat_avg_ms: float | None
    write_lat_p99_ms: float | None
    sync_lat_avg_ms: float | None
    sync_lat_p99_ms: float | None
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class SyncMethod:
    """One wal_sync_method as pg_test_fsync measured it with one 8 kB write per sync."""

    method: str
    ops_s: float
    usecs: float


@dataclass(frozen=True)
class FsyncResult:
    status: str
    error: str | None
    methods: tuple[SyncMethod, ...]
    best: str | None
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class CommitCeiling:
    """The commit rate the storage allows one connection, and what PostgreSQL made of it.

    write_ms + sync_ms = flush_ms, averaged over the wal-fsync steps (repetitions).
    pg_test_fsync_ops_s: pg_test_fsync's fdatasync line, the same measurement by another tool.
    pgbench_tps / pgbench_latency_ms: tpcb-like at 1 client (mean over repetitions).
    share: pgbench_tps / ceiling_tps. flushes_off names the setting (synchronous_commit=off,
    fsync=off) that let commits skip the flush, when the server had one.
    """

    flush_ms: float
    write_ms: float
    sync_ms: float
    ceiling_tps: float
    pg_test_fsync_ops_s: float | None = None
    pgbench_tps: float | None = None
    pgbench_latency_ms: float | None = None
    share: float | None = None
    flushes_off: str | None = None

    @property
    def above_ceiling(self) -> bool:
        return self.share is not None and self.share > ABOVE_CEILING


@dataclass(frozen=True)
class ProbeSummary:
    fio: list[FioRow]
    fsync: list[FsyncResult]
    ceiling: CommitCeiling | None


def _num(metrics: Mapping[str, JSONValue], key: str) -> float | None:
    value = metrics.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _total(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def fio_row(step: StepRecord) -> FioRow:
    m = step.metrics
    rep = step.all_params.get("repetition")
    return FioRow(
        profile=str(step.all_params.get("profile", "?")),
        repetition=rep if isinstance(rep, int) else None,
        status=step.status,
        error=step.error,
        read_iops=_num(m, "read_iops"),
        write_iops=_num(m, "write_iops"),
        mbps=_total(_num(m, "read_mbps"), _num(m, "write_mbps")),
        read_lat_avg_ms=_num(m, "read_lat_avg_ms"),
        read_lat_p99_ms=_num(m, "read_lat_p99_ms"),
        write_lat_avg_ms=_num(m, "write_lat_avg_ms"),
        write_lat_p99_ms=_num(m, "write_lat_p99_ms"),
        sync_lat_avg_ms=_num(m, "sync_lat_avg_ms"),
        sync_lat_p99_ms=_num(m, "sync_lat_p99_ms"),
        warnings=tuple(step.warnings),
    )


def fsync_result(step: StepRecord) -> FsyncResult:
    methods = []
    for method in WAL_SYNC_METHODS:
        ops, usecs = _num(step.metrics, f"{method}_ops_s"), _num(step.metrics, f"{method}_usecs")
        if ops is not None and usecs is not None:
            methods.append(SyncMethod(method, ops, usecs))
    best = step.metrics.get("best_wal_sync_method")
    return FsyncResult(
        status=step.status,
        error=step.error,
        methods=tuple(methods),
        best=str(best) if best else None,
        warnings=tuple(step.warnings),
    )


def _flush_steps(steps: list[StepRecord]) -> list[StepRecord]:
    """Completed fio steps that timed a flush per write: the wal-fsync profile, or failing
    that (imported output), any job with a sync latency."""
    synced = [
        s
        for s in steps
        if s.workload == "fio" and s.status == "completed" and "sync_lat_avg_ms" in s.metrics
    ]
    wal = [s for s in synced if s.all_params.get("profile") == WAL_PROFILE]
    return wal or synced


def _flushes_off(settings: Mapping[str, str]) -> str | None:
    for name in ("fsync", "synchronous_commit"):
        if str(settings.get(name, "")).lower() in ("off", "false", "0"):
            return f"{name}={settings[name]}"
    return None


def commit_ceiling(
    steps: Iterable[StepRecord], settings: Mapping[str, str] | None = None
) -> CommitCeiling | None:
    """The ceiling from the target's wal-fsync steps, and the tpcb-like 1-client TPS beside
    it when the run has one. None without a completed wal-fsync step."""
    steps = list(steps)
    flush_steps = _flush_steps(steps)
    flushes = [(s, commit_latency_ms(_floats(s.metrics))) for s in flush_steps]
    valid = [(s, f) for s, f in flushes if f is not None and f > 0]
    if not valid:
        return None
    flush_ms = fmean(f for _, f in valid)
    write_ms = fmean(_num(s.metrics, "write_lat_avg_ms") or 0.0 for s, _ in valid)
    sync_ms = fmean(_num(s.metrics, "sync_lat_avg_ms") or 0.0 for s, _ in valid)
    ceiling = commit_rate_ceiling(flush_ms)
    fsync_ops = [
        v
        for s in steps
        if s.workload == "pg_test_fsync" and s.status == "completed"
        for v in [_num(s.metrics, "fdatasync_ops_s")]
        if v is not None
    ]
    one_client = [
        s
        for s in steps
        if s.workload == "pgbench"
        and s.status == "completed"
        and s.all_params.get("mode") == "tpcb-like"
        and s.all_params.get("clients") == 1
        and s.all_params.get("warmup") is not True
        and _num(s.metrics, "tps") is not None
    ]
    tps = fmean(_num(s.metrics, "tps") or 0.0 for s in one_client) if one_client else None
    latencies = [v for s in one_client if (v := _num(s.metrics, "latency_avg_ms")) is not None]
    return CommitCeiling(
        flush_ms=flush_ms,
        write_ms=write_ms,
        sync_ms=sync_ms,
        ceiling_tps=ceiling,
        pg_test_fsync_ops_s=fmean(fsync_ops) if fsync_ops else None,
        pgbench_tps=tps,
        pgbench_latency_ms=fmean(latencies) if latencies else None,
        share=tps / ceiling if tps is not None else None,
        flushes_off=_flushes_off(settings or {}) if tps is not None else None,
    )


def _floats(metrics: Mapping[str, JSONValue]) -> dict[str, float]:
    return {k: v for k in metrics if (v := _num(metrics, k)) is not None}


def probe_summary(
    steps: Iterable[StepRecord], settings: Mapping[str, str] | None = None
) -> ProbeSummary | None:
    """The probe part of one target's results; None when it ran no probe."""
    steps = list(steps)
    fio = [fio_row(s) for s in steps if s.workload == "fio"]
    fsync = [fsync_result(s) for s in steps if s.workload == "pg_test_fsync"]
    if not fio and not fsync:
        return None
    return ProbeSummary(fio=fio, fsync=fsync, ceiling=commit_ceiling(steps, settings))
