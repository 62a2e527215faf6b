"""PostgreSQL's own I/O, as opposed to the whole device's: the I/O cgroup the local server is
born in, and its processes.

Device counters (/proc/diskstats) count every process that uses the disk. A local server is
therefore started in a cgroup of its own (cgroup v1 `blkio` or v2 `io`), whose counters say
what PostgreSQL alone read and wrote, per device:

- v2 `io.stat`: `MAJ:MIN rbytes= wbytes= rios= wios= dbytes= dios=`; writeback is charged to
  the cgroup that dirtied the page, so the figures are complete.
- v1 `blkio.throttle.io_service_bytes` / `io_serviced`: `MAJ:MIN Read|Write|... N`; the I/O
  that the server's processes submitted themselves (fsync, fdatasync, sync_file_range of
  `checkpoint_flush_after`), while writeback by the kernel's flusher threads is charged to the
  root cgroup. The sampler therefore also reads `/proc/PID/io` (bytes each process caused to
  be read or written) and takes the larger of the two.

Parsers are pure; `IoAccount` is a thin reader; `open_accounting` decides, for a local target,
which cgroup to read and whether one must be created.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from howfast.errors import HowfastError
from howfast.machine.cgroup import CgroupSupport, IoCgroup, MemoryCgroup, detect_io

FIELDS = ("read_bytes", "write_bytes", "read_ios", "write_ios")


def parse_io_stat(text: str) -> dict[str, dict[str, int]]:
    """cgroup v2 io.stat -> {"MAJ:MIN": {read_bytes, write_bytes, read_ios, write_ios}}."""
    names = {
        "rbytes": "read_bytes",
        "wbytes": "write_bytes",
        "rios": "read_ios",
        "wios": "write_ios",
    }
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts or ":" not in parts[0]:
            continue
        row = dict.fromkeys(FIELDS, 0)
        for item in parts[1:]:
            key, _, value = item.partition("=")
            if key in names and value.isdigit():
                row[names[key]] = int(value)
        out[parts[0]] = row
    return out


def parse_blkio_v1(service_bytes: str, serviced: str) -> dict[str, dict[str, int]]:
    """cgroup v1 blkio.throttle.io_service_bytes and io_serviced -> the same shape."""
    out: dict[str, dict[str, int]] = {}
    for text, kind in ((service_bytes, "bytes"), (serviced, "ios")):
        for line in text.splitlines():
            parts = line.split()
            if len(parts) != 3 or ":" not in parts[0] or not parts[2].isdigit():
                continue
            op = parts[1].lower()
            if op not in ("read", "write"):
                continue
            row = out.setdefault(parts[0], dict.fromkeys(FIELDS, 0))
            row[f"{op}_{kind}"] = int(parts[2])
    return out


def parse_proc_io(text: str) -> dict[str, int]:
    """/proc/PID/io -> {rchar, wchar, syscr, syscw, read_bytes, write_bytes,
    cancelled_write_bytes}."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        value = value.strip()
        if value.isdigit():
            out[key.strip()] = int(value)
    return out


def device_numbers(name: str, sys_block: Path = Path("/sys/class/block")) -> str | None:
    """'MAJ:MIN' of a block device named as /proc/diskstats names it, or None."""
    try:
        return (sys_block / name / "dev").read_text().strip()
    except OSError:
        return None


@dataclass
class IoAccount:
    """A cgroup whose I/O counters are read: v1 blkio or v2 io. `counting` is False when its
    counters may not count (cgroup v1 on a disk where counting could not be turned on)."""

    version: str
    path: Path
    counting: bool = True

    def read(self) -> dict[str, dict[str, int]]:
        if self.version == "v2":
            return parse_io_stat((self.path / "io.stat").read_text())
        return parse_blkio_v1(
            (self.path / "blkio.throttle.io_service_bytes").read_text(),
            (self.path / "blkio.throttle.io_serviced").read_text(),
        )

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []


@dataclass
class ServerIo:
    """What the server-I/O sampler reads: the cgroup (None when none could be used, with the
    reason in `note`), and the server's processes (the postmaster first)."""

    account: IoAccount | None
    postmaster: Callable[[], int | None]
    note: str | None = None


@dataclass
class Accounting:
    """What `open_accounting` decided: a cgroup created for it (to spawn the server in and
    remove at stop), the account to read, and a warning when there is none."""

    created: IoCgroup | None
    account: IoAccount | None
    warning: str | None


def open_accounting(
    name: str,
    memory: MemoryCgroup | None,
    io_cgroup: IoCgroup | None,
    disks: list[str],
    support: CgroupSupport | None = None,
) -> Accounting:
    """Find or create the cgroup whose counters are PostgreSQL's own I/O on `disks` (whole
    disks' MAJ:MIN: the data's and the WAL's).

    An I/O cgroup made by whoever built the storage (an emulated volume) is read as it is. On
    cgroup v2 a process is in one cgroup only: with --memory, its memory cgroup is read (the
    io controller enabled for it). Otherwise a cgroup of our own, without limits, is created;
    where that is impossible (no root, no controller) the warning says why and the sampler
    falls back on /proc/PID/io. On cgroup v1 the counting is turned on for `disks` first
    (IoCgroup.count_on); where it cannot be, the account is still read, with the note, and
    the analysis checks its figures against /proc/PID/io (analysis/why.py own_io)."""
    if io_cgroup is not None:
        note = io_cgroup.count_on(disks)
        return Accounting(None, IoAccount(io_cgroup.version, io_cgroup.path, note is None), note)
    support = support or detect_io()
    fallback = (
        "PostgreSQL's own I/O is read from /proc/PID/io only (bytes, no IOPS, no split by "
        "device): {why}"
    )
    if support.version is None or support.parent is None:
        return Accounting(None, None, fallback.format(why=support.reason))
    if support.version == "v2" and memory is not None:
        control = memory.parent / "cgroup.subtree_control"
        try:
            if "io" not in control.read_text().split():
                control.write_text("+io")
        except OSError as exc:
            return Accounting(None, None, fallback.format(why=f"{control}: {exc.strerror}"))
        return Accounting(None, IoAccount("v2", memory.path), None)
    group = IoCgroup(support, name, {})
    try:
        group.create()
    except HowfastError as exc:
        return Accounting(None, None, fallback.format(why=str(exc)))
    note = group.count_on(disks)
    return Accounting(group, IoAccount(group.version, group.path, note is None), note)
