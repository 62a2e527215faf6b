"""What makes a fio result not what it looks like, and the commit-rate ceiling of a job that
flushed every write: pure rules over what fio ran (its options, the filesystem, the sizes),
shared by the executor (workload.py), which warns as it runs, and by fio's part of reading a
run (analysis.py), which applies them again to stored and imported steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from howfast.analysis.memory_storage import MARK, MEMORY_FILESYSTEMS
from howfast.units import format_bytes
from howfast.walsync import commit_latency_ms, commit_rate_ceiling


@dataclass(frozen=True)
class IoChoice:
    """Whether fio may use direct I/O here, and if not, why."""

    direct: bool
    reason: str | None = None


def choose_direct(fstype: str | None, refused: bool) -> IoChoice:
    """Direct I/O unless the filesystem refuses it or keeps files in memory anyway."""
    if refused:
        return IoChoice(False, f"{fstype or 'the filesystem'} refuses direct I/O (O_DIRECT)")
    if fstype in MEMORY_FILESYSTEMS:
        return IoChoice(False, f"{fstype} keeps files in memory")
    return IoChoice(True)


def flushes_every_write(options: Mapping[str, str]) -> bool:
    """Whether each write was made durable before the next (fdatasync=1, fsync=1, sync=1):
    then the page cache cannot flatter the result."""
    return (
        options.get("fdatasync") == "1"
        or options.get("fsync") == "1"
        or options.get("sync") in ("1", "sync", "dsync")
    )


def buffered(options: Mapping[str, str]) -> bool:
    """Whether the job went through the page cache (fio's default is direct=0)."""
    return options.get("direct", "0") != "1" and options.get("buffered") != "0"


def memory_fs_warning(directory: Path | str, fstype: str | None) -> str | None:
    if fstype not in MEMORY_FILESYSTEMS:
        return None
    return (
        f"{directory} is on {fstype}, which {MARK}: nothing reaches a disk and "
        "flushes cost nothing, so these numbers are the RAM's, not a storage's"
    )


def run_warnings(
    *,
    directory: Path | str,
    fstype: str | None,
    choice: IoChoice,
    options: Mapping[str, str],
    size_bytes: int,
    memory_bytes: int | None,
) -> list[str]:
    """What makes a howfast fio result not what it looks like, from what fio really ran."""
    warnings = []
    in_memory = memory_fs_warning(directory, fstype)
    if in_memory:
        warnings.append(in_memory)
    cached = buffered(options) and not flushes_every_write(options)
    if cached and choice.reason:
        warnings.append(
            f"buffered I/O: {choice.reason}, so fio measured the page cache, not the device"
        )
    if cached and memory_bytes and size_bytes < memory_bytes:
        warnings.append(
            f"buffered I/O on a test file ({format_bytes(size_bytes)}) smaller than memory "
            f"({format_bytes(memory_bytes)}): it can be read and written entirely in the "
            "page cache"
        )
    return warnings


def imported_warnings(options: Mapping[str, str]) -> list[str]:
    """The same trust checks for fio output produced elsewhere, from its echoed options."""
    warnings = []
    if options.get("gtod_reduce") == "1":
        warnings.append("gtod_reduce=1: fio did not time each I/O, so latencies are not measured")
    if buffered(options) and not flushes_every_write(options):
        warnings.append(
            "buffered I/O (direct=0): reads and writes may have been served by the page "
            "cache, not the device"
        )
    return warnings


def prefill_shortfall(written: int | None, size_bytes: int) -> str | None:
    """The prefill warning from what it wrote (None: there was no prefill job)."""
    if written is None:
        return "fio's output has no prefill job: the test file may not have been written in full"
    if written >= size_bytes:
        return None
    return (
        f"the prefill wrote {format_bytes(written)} of the {format_bytes(size_bytes)} test "
        "file: reads may have hit blocks never written, which cost no device I/O"
    )


def commit_metrics(metrics: Mapping[str, float]) -> dict[str, float]:
    """commit_latency_ms (write + flush) and commit_ceiling_tps (1000 / it) of a job that
    flushed every write; empty when the job did not sync."""
    flush = commit_latency_ms(metrics)
    if flush is None or flush <= 0:
        return {}
    return {"commit_latency_ms": flush, "commit_ceiling_tps": commit_rate_ceiling(flush)}
