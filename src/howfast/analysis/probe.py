"""The commit-rate ceiling of a target's storage, set against what PostgreSQL reached.

A commit of one connection waits for its WAL write and flush, one after the other, so
1000 / (write + flush latency in ms) of the wal-fsync profile is the most commits per second
one connection can make on this storage. pgbench tpcb-like at 1 client is one connection
committing as fast as it can; its TPS over the ceiling says how much of what the storage
allows PostgreSQL gets (the rest goes to executing the transaction and round trips).

Which steps measured what is their workloads' to say (analysis/hooks.py `Evidence`): fio's
flush timing, pg_test_fsync's fdatasync rate, pgbench's one-connection commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import fmean

from howfast.analysis.hooks import evidence_of
from howfast.model import StepRecord
from howfast.walsync import commit_rate_ceiling

# Above this share of the ceiling, PostgreSQL's commits cannot all have waited for a flush.
ABOVE_CEILING = 1.05


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


def _flushes_off(settings: Mapping[str, str]) -> str | None:
    for name in ("fsync", "synchronous_commit"):
        if str(settings.get(name, "")).lower() in ("off", "false", "0"):
            return f"{name}={settings[name]}"
    return None


def commit_ceiling(
    steps: Iterable[StepRecord], settings: Mapping[str, str] | None = None
) -> CommitCeiling | None:
    """The ceiling from what the target's steps say of a flush (analysis/hooks.py `Evidence`:
    fio's wal-fsync profile, or failing that, imported output, any job that timed a sync),
    with pg_test_fsync's fdatasync rate and one connection's commits (pgbench tpcb-like at 1
    client) beside it when the run has them. None without a completed step that timed a
    flush."""
    evidence = [e for s in steps if (e := evidence_of(s)) is not None]
    synced = [e for e in evidence if e.times_flushes]
    chosen = [e for e in synced if e.preferred_flush] or synced
    valid = [e.flush_ms for e in chosen if e.flush_ms is not None and e.flush_ms > 0]
    if not valid:
        return None
    timed = [e for e in chosen if e.flush_ms is not None and e.flush_ms > 0]
    flush_ms = fmean(valid)
    write_ms = fmean(e.write_ms or 0.0 for e in timed)
    sync_ms = fmean(e.sync_ms or 0.0 for e in timed)
    ceiling = commit_rate_ceiling(flush_ms)
    fsync_ops = [e.fsync_ops_s for e in evidence if e.fsync_ops_s is not None]
    one_client = [e for e in evidence if e.commit_tps is not None]
    tps = fmean(e.commit_tps or 0.0 for e in one_client) if one_client else None
    latencies = [e.commit_latency_ms for e in one_client if e.commit_latency_ms is not None]
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
