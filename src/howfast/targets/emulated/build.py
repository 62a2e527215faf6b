"""Pure builders for emulated volumes: what to run and what to write, never run or written.

The nbdkit backend: the volume image (a sparse file in the target directory, formatted as
ext4 before anything serves it) is served by nbdkit on a unix socket, through howfast's own
plugin (delay_plugin.py, run by nbdkit's python plugin) that delays reads, writes and flushes;
nbdfuse shows it as a file, which a loop device with direct I/O turns into a block device
that is mounted. IOPS and bandwidth caps are the I/O controller's limits on that block device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

from howfast.iolimits import IoLimits

DELAY_PLUGIN = Path(__file__).with_name("delay_plugin.py")


@dataclass(frozen=True)
class Limits:
    """What the emulated volume adds or caps. Zero latency still builds the volume, so that a
    sweep compares like with like (the same layers, only the delay differs)."""

    latency_ms: float = 0.0
    iops: int | None = None  # read and write IOPS cap, each
    bps: int | None = None  # read and write bytes/s cap, each

    def io_limits(self) -> IoLimits:
        """The caps, for the volume's I/O cgroup: the same for reads and writes."""
        return IoLimits(self.iops, self.iops, self.bps, self.bps)

    def describe(self) -> str:
        parts = [f"+{format_ms(self.latency_ms)}"]
        if self.iops:
            parts.append(f"{self.iops} IOPS")
        if self.bps:
            parts.append(f"{self.bps // 2**20} MiB/s")
        return " ".join(parts)


def format_ms(value: float) -> str:
    """2.0 -> '2ms', 0.5 -> '0.5ms', 0 -> '0ms'."""
    return f"{value:g}ms"


def nbdkit_argv(
    image: PurePath,
    socket: PurePath,
    pidfile: PurePath,
    latency_ms: float,
    nodelay_file: PurePath | None = None,
    delay_file: PurePath | None = None,
) -> list[str]:
    """nbdkit in the foreground (stopped by its PID), serving the image on a unix socket only,
    through the delay plugin: reads, writes, zeroes and flushes each wait `latency_ms` (which
    may be a fraction, passed exactly). +0 ms goes through the plugin too, so that variants
    differ only by the delay. Once `nodelay_file` exists nothing waits any more: howfast
    creates it to take the volume down (or stop building it) without waiting out delays.
    `delay_file`, once written, holds the delay in force (milliseconds; changed live)."""
    argv = [
        "nbdkit", "--foreground", "--unix", str(socket), "--pidfile", str(pidfile),
        "python", str(DELAY_PLUGIN), f"file={image}", f"delay-ms={float(latency_ms)!r}",
    ]  # fmt: skip
    if nodelay_file is not None:
        argv.append(f"nodelay-file={nodelay_file}")
    if delay_file is not None:
        argv.append(f"delay-file={delay_file}")
    return argv


def plain_nbdkit_argv(image: PurePath, socket: PurePath, pidfile: PurePath) -> list[str]:
    """nbdkit's own file plugin, no delay: not used for volumes (the variants of a sweep all go
    through the delay plugin), only as the reference benchmarks/emulated-volume measures the
    delay plugin's own cost against."""
    return [
        "nbdkit", "--foreground", "--unix", str(socket), "--pidfile", str(pidfile),
        "file", str(image),
    ]  # fmt: skip


def nbdfuse_argv(mount_dir: PurePath, socket: PurePath, pidfile: PurePath) -> list[str]:
    """nbdfuse in the foreground: the volume appears as the file `mount_dir/nbd`."""
    return ["nbdfuse", "--pidfile", str(pidfile), str(mount_dir), "--unix", str(socket)]


def mkfs_argv(image: PurePath) -> list[str]:
    """ext4 on the image file itself, before any delay applies: formatting is not measured.
    No discard (the image is sparse already); lazy inode tables keep it quick."""
    return [
        "mkfs.ext4", "-q", "-F", "-E", "nodiscard,lazy_itable_init=1,lazy_journal_init=1",
        "-L", "howfast", str(image),
    ]  # fmt: skip


def mount_argv(device: str, mount_dir: PurePath) -> list[str]:
    """noinit_itable: mkfs left the inode tables to be zeroed lazily, and without this option
    the kernel's ext4lazyinit thread writes them out after mounting, in the background, through
    the added delay and in the middle of the measurement (megabytes of writes no workload
    asked for). The image is sparse, so those tables read as zeros already."""
    return ["mount", "-o", "noatime,noinit_itable", device, str(mount_dir)]


def losetup_argv(backing: PurePath) -> list[str]:
    """A loop device with direct I/O: without it the page cache would absorb the delay."""
    return ["losetup", "--find", "--show", "--direct-io=on", str(backing)]


def variants(latencies: Sequence[float], iops: Sequence[int | None]) -> list[Limits]:
    """Every combination, latencies outermost: each is a variant of the target."""
    return [Limits(latency_ms=lat, iops=cap) for lat in latencies for cap in iops]
