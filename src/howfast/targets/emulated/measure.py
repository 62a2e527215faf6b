"""What an emulated volume really adds to a flush, measured on its block device."""

from __future__ import annotations

import os
import statistics
import time

FLUSH_CHECKS = 20


def flush_latency_ms(device: str, count: int = FLUSH_CHECKS) -> float:
    """The median of `flush_times_ms`: one flush's typical time."""
    return statistics.median(flush_times_ms(device, count))


def flush_times_ms(device: str, count: int = FLUSH_CHECKS) -> list[float]:
    """The times of an fsync of the block device with nothing to write: one flush
    request through every layer (loop device, FUSE, nbdkit), its delay and the image's
    fdatasync. The median, because a flush that meets writes the image still had in the
    page cache (the new filesystem zeroing its inode tables) takes the storage's time."""
    fd = os.open(device, os.O_RDONLY)
    try:
        times = []
        for _ in range(count):
            start = time.perf_counter()
            os.fsync(fd)
            times.append((time.perf_counter() - start) * 1000)
        return times
    finally:
        os.close(fd)
