"""Block device counters from /proc/diskstats, and what they mean per interval.

Pure: `parse_diskstats` reads the file's text, `rates` is iostat's arithmetic (counts over
elapsed time, wait time per request, queue depth from the weighted time in queue, utilisation
from the time the device had I/O in flight). Shared by the disk sampler, which reads the file
once per tick, by seqread, and by analysis, which derives a step's figures from the stored
counter deltas; it imports nothing of howfast's, so analysis never imports a sampler.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

DISKSTATS = Path("/proc/diskstats")
SECTOR = 512  # /proc/diskstats counts 512-byte sectors whatever the device's block size


@dataclass(frozen=True)
class DiskCounters:
    """One device's cumulative counters (Documentation/admin-guide/iostats.rst)."""

    reads: int
    reads_merged: int
    sectors_read: int
    read_ms: int
    writes: int
    writes_merged: int
    sectors_written: int
    write_ms: int
    in_flight: int
    io_ms: int  # time with at least one request in flight
    weighted_ms: int  # time in queue summed over requests: the queue depth integral
    flushes: int = 0  # kernel 5.5+
    flush_ms: int = 0


def parse_diskstats(text: str) -> dict[str, DiskCounters]:
    """Device name -> counters. Lines of 14, 18 or 20 fields (kernels before 4.18, before
    5.5, and newer) are all read; discard counters are not used."""
    devices: dict[str, DiskCounters] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 14:
            continue
        try:
            v = [int(f) for f in parts[3:]]
        except ValueError:
            continue
        flushes = v[15:17] if len(v) >= 17 else [0, 0]
        devices[parts[2]] = DiskCounters(*v[:11], *flushes)
    return devices


@dataclass(frozen=True)
class DiskRates:
    """What a device did between two readings, per second or per request."""

    read_iops: float
    write_iops: float
    read_bytes: int
    write_bytes: int
    read_mbps: float  # 10^6 bytes per second, as fio's figures
    write_mbps: float
    avg_read_kib: float | None  # None when there was no request of that kind
    avg_write_kib: float | None
    read_await_ms: float | None
    write_await_ms: float | None
    read_merges_per_s: float
    write_merges_per_s: float
    read_merged_ratio: float | None  # merged / (merged + issued)
    write_merged_ratio: float | None
    queue_depth: float
    util_pct: float
    flushes_per_s: float


CUMULATIVE = tuple(f.name for f in fields(DiskCounters) if f.name != "in_flight")


def counter_delta(before: DiskCounters, after: DiskCounters) -> dict[str, int]:
    """How much each cumulative counter grew (never negative)."""
    return {
        name: max(0, int(getattr(after, name)) - int(getattr(before, name))) for name in CUMULATIVE
    }


def counters_from_delta(delta: dict[str, int]) -> tuple[DiskCounters, DiskCounters]:
    """A (zero, delta) pair of readings, so that `rates` can summarise a stored delta."""
    zero = DiskCounters(*(0 for _ in fields(DiskCounters)))
    return zero, replace(zero, **{k: int(v) for k, v in delta.items() if k in CUMULATIVE})


def _per(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def rates(before: DiskCounters, after: DiskCounters, seconds: float) -> DiskRates:
    """Deltas over `seconds`. Counters that went backwards (a device re-created, a 32-bit
    wrap on old kernels) count as zero rather than as a huge negative rate."""
    s = max(seconds, 1e-9)

    def d(name: str) -> int:
        return max(0, int(getattr(after, name)) - int(getattr(before, name)))

    reads, writes = d("reads"), d("writes")
    rbytes, wbytes = d("sectors_read") * SECTOR, d("sectors_written") * SECTOR
    rmerged, wmerged = d("reads_merged"), d("writes_merged")
    read_kib = _per(rbytes / 1024, reads)
    write_kib = _per(wbytes / 1024, writes)
    return DiskRates(
        read_iops=reads / s,
        write_iops=writes / s,
        read_bytes=rbytes,
        write_bytes=wbytes,
        read_mbps=rbytes / 1e6 / s,
        write_mbps=wbytes / 1e6 / s,
        avg_read_kib=read_kib,
        avg_write_kib=write_kib,
        read_await_ms=_per(d("read_ms"), reads),
        write_await_ms=_per(d("write_ms"), writes),
        read_merges_per_s=rmerged / s,
        write_merges_per_s=wmerged / s,
        read_merged_ratio=_per(rmerged, rmerged + reads),
        write_merged_ratio=_per(wmerged, wmerged + writes),
        queue_depth=d("weighted_ms") / (s * 1000),
        util_pct=min(100.0, d("io_ms") / (s * 1000) * 100),
        flushes_per_s=d("flushes") / s,
    )
