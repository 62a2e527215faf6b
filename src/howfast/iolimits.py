"""I/O limits on one block device for a cgroup: IOPS and bandwidth caps (cgroup v1
blkio.throttle.*, v2 io.max) and a proportional weight (v1 blkio.bfq.weight, v2 io.weight,
which only the bfq scheduler honours). Pure builders and checks; IoCgroup (cgroup.py) writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class IoLimits:
    read_iops: int | None = None
    write_iops: int | None = None
    read_bps: int | None = None
    write_bps: int | None = None
    weight: int | None = None  # 1..1000 (v1 bfq) / 1..10000 (v2); share, not a cap

    @property
    def caps(self) -> bool:
        return any((self.read_iops, self.write_iops, self.read_bps, self.write_bps))

    def describe(self) -> str:
        parts = []
        if self.read_iops and self.read_iops == self.write_iops:
            parts.append(f"{self.read_iops} IOPS")
        else:
            parts += [f"{self.read_iops} read IOPS"] if self.read_iops else []
            parts += [f"{self.write_iops} write IOPS"] if self.write_iops else []
        parts += [f"{self.read_bps // 2**20} MiB/s read"] if self.read_bps else []
        parts += [f"{self.write_bps // 2**20} MiB/s write"] if self.write_bps else []
        parts += [f"weight {self.weight}"] if self.weight else []
        return ", ".join(parts) or "no limits"


def throttle_lines(version: str, devnum: str, limits: IoLimits) -> dict[str, str]:
    """What to write into the cgroup: cgroup v1 blkio.throttle files, one line each, or
    cgroup v2 io.max's single line; and the weight file. Empty when nothing is limited."""
    lines: dict[str, str] = {}
    if limits.caps and version == "v2":
        fields = [
            f"riops={limits.read_iops or 'max'}",
            f"wiops={limits.write_iops or 'max'}",
            f"rbps={limits.read_bps or 'max'}",
            f"wbps={limits.write_bps or 'max'}",
        ]
        lines["io.max"] = f"{devnum} {' '.join(fields)}"
    elif limits.caps:
        for name, value in (
            ("read_iops_device", limits.read_iops),
            ("write_iops_device", limits.write_iops),
            ("read_bps_device", limits.read_bps),
            ("write_bps_device", limits.write_bps),
        ):
            if value:
                lines[f"blkio.throttle.{name}"] = f"{devnum} {value}"
    if limits.weight:
        lines["io.weight" if version == "v2" else "blkio.bfq.weight"] = str(limits.weight)
    return lines


# Where cgroup v1 counts a cgroup's I/O. Since Linux 6.10 blk-throttle is set up on a disk only
# when a throttle rule is first written for it: until then `blkio.throttle.io_service_bytes`
# reads 0 for every cgroup, whatever they do (once set up, it counts in every cgroup until
# reboot). Writing "MAJ:MIN 0" (no limit) sets it up without limiting anything; on older
# kernels the write is a no-op that is also accepted.
COUNTING_FILE = "blkio.throttle.read_bps_device"


def counting_line(devnum: str, existing_rules: str) -> str | None:
    """The line that turns cgroup v1 counting on for a whole disk, or None when the file's
    current rules (`existing_rules`, as read back) already hold one for it: rewriting that
    would remove a real limit."""
    if any(line.split()[:1] == [devnum] for line in existing_rules.splitlines()):
        return None
    return f"{devnum} 0"


def scheduler_of(disk: str, sys_root: Path = Path("/sys")) -> str | None:
    """The active I/O scheduler of a whole disk ('[bfq]' in queue/scheduler -> 'bfq')."""
    try:
        text = (sys_root / "block" / disk / "queue" / "scheduler").read_text()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else (text.strip() or None)


def weight_problem(disk: str, scheduler: str | None) -> str | None:
    """Why weights would not be honoured on this disk, or None."""
    if scheduler == "bfq":
        return None
    return (
        f"I/O weights are honoured only by the bfq scheduler, and {disk} uses "
        f"{scheduler or 'an unknown scheduler'} (echo bfq > /sys/block/{disk}/queue/scheduler "
        "to change it, if you may)"
    )


@dataclass(frozen=True)
class IoCounters:
    """What a cgroup's processes asked of one device, cumulative."""

    read_ios: int = 0
    write_ios: int = 0
    read_bytes: int = 0
    write_bytes: int = 0

    def minus(self, earlier: IoCounters) -> IoCounters:
        return IoCounters(
            self.read_ios - earlier.read_ios,
            self.write_ios - earlier.write_ios,
            self.read_bytes - earlier.read_bytes,
            self.write_bytes - earlier.write_bytes,
        )


def parse_v1_counters(serviced: str, service_bytes: str, devnum: str) -> IoCounters:
    """blkio.throttle.io_serviced and io_service_bytes ('254:0 Read 12' lines)."""

    def values(text: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for line in text.splitlines():
            fields = line.split()
            if len(fields) == 3 and fields[0] == devnum and fields[2].isdigit():
                out[fields[1]] = int(fields[2])
        return out

    ios, sizes = values(serviced), values(service_bytes)
    return IoCounters(
        ios.get("Read", 0), ios.get("Write", 0), sizes.get("Read", 0), sizes.get("Write", 0)
    )


def parse_v2_counters(io_stat: str, devnum: str) -> IoCounters:
    """io.stat ('254:0 rbytes=1 wbytes=2 rios=3 wios=4 ...')."""
    for line in io_stat.splitlines():
        fields = line.split()
        if fields and fields[0] == devnum:
            kv = dict(f.split("=", 1) for f in fields[1:] if "=" in f)
            return IoCounters(
                int(kv.get("rios", 0)),
                int(kv.get("wios", 0)),
                int(kv.get("rbytes", 0)),
                int(kv.get("wbytes", 0)),
            )
    return IoCounters()


# --- a cap set for a while, then lifted (issue 29's cap-iops event) -------------------------

V1_IOPS_FILES = ("blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device")
V2_FILE = "io.max"


def iops_cap_files(version: str) -> tuple[str, ...]:
    return (V2_FILE,) if version == "v2" else V1_IOPS_FILES


def iops_cap_lines(version: str, devnum: str, iops: int) -> dict[str, str]:
    """The lines that cap a cgroup's read and write IOPS on one disk at `iops` each."""
    return throttle_lines(version, devnum, IoLimits(read_iops=iops, write_iops=iops))


def lifted_lines(version: str, devnum: str, previous: dict[str, str]) -> dict[str, str]:
    """The lines that undo a cap on `devnum`: the rule each file held before it (`previous`:
    file -> its text as read then), else no limit ("MAJ:MIN 0" on v1, "max" on v2)."""
    out = {}
    for name in iops_cap_files(version):
        before = next(
            (line for line in previous.get(name, "").splitlines() if line.split()[:1] == [devnum]),
            None,
        )
        if before is not None:
            out[name] = before
        elif version == "v2":
            out[name] = f"{devnum} riops=max wiops=max rbps=max wbps=max"
        else:
            out[name] = f"{devnum} 0"
    return out
