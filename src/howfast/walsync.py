"""What one WAL flush costs, and what that allows: the commit latency of the wal-fsync fio
profile, the commit-rate ceiling of one connection, and the wal_sync_method names.

Pure, and importing nothing of howfast's: fio's executor, pg_test_fsync's parser and the probe
analysis share it, so that analysis never imports a workload.
"""

from __future__ import annotations

from collections.abc import Mapping

# The sync methods pg_test_fsync compares first, which are wal_sync_method values.
WAL_SYNC_METHODS = ("open_datasync", "fdatasync", "fsync", "fsync_writethrough", "open_sync")


def commit_latency_ms(metrics: Mapping[str, float]) -> float | None:
    """What one WAL flush costs, in ms, from the metrics of the wal-fsync job.

    A commit first write()s its WAL and then fdatasync()s it, one after the other and never
    overlapped for one connection; fio times the two separately (the write latency and the
    `sync` latency). The floor per commit is therefore their sum, not the sync latency
    alone. The sum also holds whatever the write mode: with buffered writes the write is a
    copy into the page cache and the fdatasync carries the device time, with direct I/O the
    write reaches the device and the fdatasync mostly flushes its cache.
    None when the job did not sync after its writes.
    """
    sync = metrics.get("sync_lat_avg_ms")
    if sync is None:
        return None
    return metrics.get("write_lat_avg_ms", 0.0) + sync


def commit_rate_ceiling(flush_ms: float) -> float:
    """The most commits per second one connection can make when each waits flush_ms for its
    WAL flush (see commit_latency_ms): 1000 / flush_ms. Group commit lets several
    connections share one flush, so the ceiling applies per connection, not per server."""
    if flush_ms <= 0:
        raise ValueError(f"a flush latency must be positive: {flush_ms}")
    return 1000.0 / flush_ms
