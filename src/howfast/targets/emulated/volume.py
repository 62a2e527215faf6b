"""Assembling an emulated volume and taking it apart, in the order that leaves nothing behind.

    volume = EmulatedVolume(workspace, size_bytes, limits)   # nothing happens yet
    volume.build()        # image + ext4, nbdkit, nbdfuse, loop device, mount
    ... volume.mount_dir holds the filesystem ...
    volume.teardown()     # unmount, detach, unmount FUSE, stop nbdkit by PID; idempotent

Every process is started by howfast and stopped by its PID; every mount and loop device is
one this object made: the ones it remembers, and the loop devices whose backing file is its
own FUSE file (an interrupted losetup attaches one without saying which). `available()` says
which backend this machine offers, or why none, with what to install.

Interruptible: a Ctrl-C while a layer is set up (a mount waits for each of its I/Os in
turn, uninterruptibly) first lifts the delay (`undelay`: the plugin's nodelay file), so that
the tool in flight finishes at once, then takes the layers down without waiting out delays.
Should a request stay in flight all the same (the tool does not end, the loop device keeps
the FUSE file), nbdkit is killed by its PID (`fail_requests`): every request then fails at
once, nothing in the kernel waits for one any more, and the layers come down.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from howfast.errors import HowfastError, MissingToolError
from howfast.plans.model import MAX_ADDED_LATENCY_MS
from howfast.targets.emulated.build import (
    DELAY_PLUGIN,
    Limits,
    losetup_argv,
    mkfs_argv,
    mount_argv,
    nbdfuse_argv,
    nbdkit_argv,
)

READY_TIMEOUT_S = 20
SETTLE_S = 10  # an interrupted tool, once the delay is lifted, ends within this, else killed
STUCK_S = 5  # a detached loop device keeping its file longer has a request stuck in flight
RELEASE_S = 30  # a detached loop device lets go of its file once its last I/O is done
NBDFUSE_ENDS_S = 2.0  # nbdfuse ends by itself once its FUSE file is unmounted
SYS_BLOCK = Path("/sys/block")
NBDKIT_PLUGIN_DIRS = ("/usr/lib/x86_64-linux-gnu/nbdkit/plugins", "/usr/lib/nbdkit/plugins")
INSTALL_HINT = (
    "install them with: sudo apt-get install -y nbdkit nbdkit-plugin-python libnbd-bin fuse3"
)
BACKEND = "nbdkit-python"


@dataclass(frozen=True)
class Backend:
    name: str | None  # BACKEND, or None when none works here
    reason: str  # what was found, or why none can be used


def available() -> Backend:
    """The nbdkit backend needs root (loop devices, mounts), /dev/fuse, nbdkit with its python
    plugin (which runs howfast's delay plugin), nbdfuse, losetup and mkfs.ext4. nbdkit's delay
    filter is not used: it cannot delay flushes. device-mapper's delay target is not used
    either: this project's machines have no device-mapper, so that path could not be tested."""
    if os.geteuid() != 0:
        return Backend(None, "emulated volumes need root (loop devices and mounts)")
    missing = [p for p in ("nbdkit", "nbdfuse", "losetup", "mkfs.ext4") if not shutil.which(p)]
    if missing:
        return Backend(None, f"missing {', '.join(missing)}")
    if not any(Path(d, "nbdkit-python-plugin.so").exists() for d in NBDKIT_PLUGIN_DIRS):
        return Backend(None, "nbdkit's python plugin is not installed (nbdkit-plugin-python)")
    if not DELAY_PLUGIN.is_file():  # a howfast installed without its package data
        return Backend(None, f"howfast's delay plugin {DELAY_PLUGIN} is missing")
    if not Path("/dev/fuse").exists():
        return Backend(None, "/dev/fuse is missing (no FUSE in this kernel or container)")
    if not Path("/dev/loop-control").exists():
        return Backend(None, "/dev/loop-control is missing (no loop devices here)")
    return Backend(
        BACKEND,
        f"{BACKEND}: nbdkit with howfast's delay plugin (reads, writes and flushes "
        "delayed), through nbdfuse and a loop device",
    )


def require_backend() -> Backend:
    backend = available()
    if backend.name is None:
        raise MissingToolError(f"cannot emulate a slower volume: {backend.reason}", INSTALL_HINT)
    return backend


class EmulatedVolume:
    def __init__(self, workspace: Path, run_dir: Path, size_bytes: int, limits: Limits) -> None:
        self.workspace = workspace  # on the storage under test: holds the image and mount
        self.run_dir = run_dir  # private (tmpfs): sockets, pid files, logs
        self.size_bytes = size_bytes
        self.limits = limits
        self.image = workspace / "volume.img"
        self.mount_dir = workspace / "mnt"
        self.fuse_dir = run_dir / "fuse"
        self.socket = run_dir / "nbdkit.sock"
        self.nodelay_file = run_dir / "nodelay"  # once it exists, the plugin delays nothing
        self.delay_file = run_dir / "delay-ms"  # once written, the delay in force (set_latency)
        self.latency_ms = limits.latency_ms
        # What serves the image: the delay plugin (a benchmark may put another server here).
        self.nbdkit_argv = nbdkit_argv(
            self.image, self.socket, run_dir / "nbdkit.pid", limits.latency_ms, self.nodelay_file,
            self.delay_file,
        )  # fmt: skip
        self.loop_device: str | None = None
        self._nbdkit: subprocess.Popen[bytes] | None = None
        self._nbdfuse: subprocess.Popen[bytes] | None = None
        self._fuse_mounted = False
        self._mounted = False

    @property
    def devnum(self) -> str | None:
        """'major:minor' of the loop device, as the I/O controller names devices."""
        if self.loop_device is None:
            return None
        rdev = os.stat(self.loop_device).st_rdev
        return f"{os.major(rdev)}:{os.minor(rdev)}"

    def undelay(self) -> None:
        """No request waits any more (the volume is being taken down): quick, and safe to
        call at any time, from a signal handler too."""
        with contextlib.suppress(OSError):
            self.nodelay_file.touch()

    def set_latency(self, ms: float) -> None:
        """The delay every request of the volume waits from now on (within the plugin's
        CHECK_S): written to a new file renamed over the delay file, so the plugin never reads
        half a number."""
        if not math.isfinite(ms) or ms < 0 or ms > MAX_ADDED_LATENCY_MS:
            raise HowfastError(
                f"an emulated volume adds 0 to {MAX_ADDED_LATENCY_MS:g} ms, not {ms}"
            )
        fresh = self.delay_file.with_name(f".{self.delay_file.name}.new")
        fresh.write_text(f"{float(ms)!r}\n")
        os.replace(fresh, self.delay_file)
        self.latency_ms = ms

    def fail_requests(self) -> None:
        """Every request in flight fails at once (nbdkit killed by its PID): for a volume
        being taken down whose requests do not end although the delay is lifted."""
        if self._nbdkit is not None and self._nbdkit.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._nbdkit.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._nbdkit.wait(timeout=5)

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """A tool on the volume, interruptible although its I/O is not: see run_interruptibly."""
        return run_interruptibly(argv, self.undelay, stuck=self.fail_requests)

    def build(self) -> None:
        """Each layer in turn; on any failure or interruption what was built is taken down
        again, and the first exception is the one raised (what could not be taken down is
        tried again, and said, by the next teardown)."""
        try:
            self._build()
        except BaseException:
            with contextlib.suppress(HowfastError):
                self.teardown()
            raise

    def _run(self, argv: list[str], what: str) -> str:
        out = self.run(argv)
        if out.returncode != 0:
            tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
            raise HowfastError(f"{what} failed (exit {out.returncode}): {' '.join(tail)}")
        return out.stdout

    def _build(self) -> None:
        with self.image.open("wb") as f:
            f.truncate(self.size_bytes)  # sparse: takes space only as it is written
        self._run(mkfs_argv(self.image), "mkfs.ext4")
        self.fuse_dir.mkdir()
        self._nbdkit = _start(self.nbdkit_argv, self.run_dir / "nbdkit.log")
        _wait_for(lambda: self.socket.exists(), self._nbdkit, "nbdkit", self.run_dir / "nbdkit.log")
        self._nbdfuse = _start(
            nbdfuse_argv(self.fuse_dir, self.socket, self.run_dir / "nbdfuse.pid"),
            self.run_dir / "nbdfuse.log",
        )
        self._fuse_mounted = True  # from here on, teardown unmounts it
        pidfile = self.run_dir / "nbdfuse.pid"
        _wait_for(pidfile.exists, self._nbdfuse, "nbdfuse", self.run_dir / "nbdfuse.log")
        self.mount_dir.mkdir()
        self.loop_device = self._run(losetup_argv(self.fuse_dir / "nbd"), "losetup").strip()
        self._mounted = True  # from here on, teardown unmounts it if it is mounted
        self._run(mount_argv(self.loop_device, self.mount_dir), "mount")
        self.mount_dir.chmod(0o755)  # the server's OS user creates its cluster inside

    def teardown(self) -> None:
        """Unmount, detach the loop device, unmount FUSE, stop nbdkit; each step is tried even
        when an earlier one failed, and the first failure is raised at the end. The volume is
        about to be deleted: its I/O is no longer delayed."""
        self.undelay()
        problems: list[str] = []
        if self._mounted and _is_mounted(self.mount_dir):
            problems += _retry(["umount", str(self.mount_dir)], "umount")
        self._mounted = _is_mounted(self.mount_dir)
        for device in {*([self.loop_device] if self.loop_device else []), *self.loop_devices()}:
            problems += _try(["losetup", "--detach", device], "losetup --detach")
        self.loop_device = None
        if self._fuse_mounted and _is_mounted(self.fuse_dir):
            if not self._wait_for_loop_release(STUCK_S):
                self.fail_requests()  # its last request does not end: fail it, and any other
                self._wait_for_loop_release(RELEASE_S)
            problems += _unmount_fuse(self.fuse_dir)  # retried: the loop device may still close
            self._fuse_mounted = _is_mounted(self.fuse_dir)
        for proc, ends_s in ((self._nbdfuse, NBDFUSE_ENDS_S), (self._nbdkit, 0.0)):
            if proc is not None:
                _stop(proc, ends_s)  # nbdkit serves until stopped: SIGTERM at once
        self._nbdfuse = self._nbdkit = None
        if not self._mounted and not self._fuse_mounted:
            with contextlib.suppress(FileNotFoundError):
                self.image.unlink()
            for directory in (self.mount_dir, self.fuse_dir):
                with contextlib.suppress(OSError):
                    directory.rmdir()
        if problems:
            raise HowfastError("taking the emulated volume down: " + "; ".join(problems))

    def loop_devices(self) -> list[str]:
        """The loop devices backed by this volume's FUSE file, from sysfs (no I/O on the file):
        the one losetup printed, and one an interrupted losetup attached without saying."""
        return loop_devices_of(self.fuse_dir / "nbd")

    def _wait_for_loop_release(self, within_s: float) -> bool:
        """A detached loop device lets go of its backing file only once its last I/O is done
        and udev has closed it: unmounting FUSE before that says "target is busy". Whether
        it did within `within_s`."""
        deadline = time.monotonic() + within_s
        while self.loop_devices():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True


def loop_devices_of(backing: Path, sys_block: Path = SYS_BLOCK) -> list[str]:
    """/dev/loopN of every loop device whose backing file is `backing` (sysfs names a deleted
    file with " (deleted)" after it)."""
    found = []
    for entry in sorted(sys_block.glob("loop*")):
        try:
            name = (entry / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
        if name.removesuffix(" (deleted)") == str(backing):
            found.append(f"/dev/{entry.name}")
    return found


def run_interruptibly(
    argv: list[str],
    interrupted: Callable[[], None],
    settle_s: float = SETTLE_S,
    stuck: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a tool and collect its output. A tool doing I/O on the volume cannot be killed
    while a delayed request is in flight (state D), so an exception while it runs (Ctrl-C's
    Aborted) first calls `interrupted` (which lifts the delay), then lets the tool end by
    itself within `settle_s`; otherwise calls `stuck` (which fails the requests in flight,
    the only way out of state D) and kills it, and never waits for it without end."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # Ctrl-C reaches howfast, which ends it
    )
    try:
        stdout, stderr = proc.communicate()
    except BaseException:
        interrupted()
        try:
            proc.communicate(timeout=settle_s)  # reading on: a full pipe would block it
        except subprocess.TimeoutExpired:
            if stuck is not None:
                stuck()
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=settle_s)
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def _run(argv: list[str], what: str) -> str:
    """A quick command of the teardown (umount, losetup --detach): no delay applies any more."""
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        raise HowfastError(f"{what} failed (exit {out.returncode}): {' '.join(tail)}")
    return out.stdout


def _try(argv: list[str], what: str) -> list[str]:
    try:
        _run(argv, what)
    except HowfastError as exc:
        return [str(exc)]
    return []


def _retry(argv: list[str], what: str, attempts: int = 25) -> list[str]:
    """An unmount right after the server stopped can meet a process still closing its files
    ("target is busy"): try again for a few seconds before giving up."""
    for _ in range(attempts - 1):
        if not _try(argv, what):
            return []
        time.sleep(0.2)
    return _try(argv, what)


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches howfast, which takes the layers down
        )


def _wait_for(ready: object, proc: subprocess.Popen[bytes], what: str, log: Path) -> None:
    assert callable(ready)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not ready():
        if proc.poll() is not None:
            said = log.read_text(errors="replace").strip().splitlines()[-3:]
            raise HowfastError(f"{what} exited (status {proc.returncode}): {' '.join(said)}")
        if time.monotonic() > deadline:
            raise HowfastError(f"{what} was not ready within {READY_TIMEOUT_S} s")
        time.sleep(0.05)


def _is_mounted(path: Path) -> bool:
    target = str(path)
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) > 1 and fields[1].encode().decode("unicode_escape") == target:
                return True
    return False


def _unmount_fuse(path: Path) -> list[str]:
    """fusermount3 -u where it exists (it is the documented way), else umount as root."""
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    argv = [tool, "-u", str(path)] if tool else ["umount", str(path)]
    return _retry(argv, "unmounting the FUSE file")


def _stop(proc: subprocess.Popen[bytes], ends_s: float) -> None:
    """Given `ends_s` to end by itself (nbdfuse once unmounted; nbdkit never does), then
    SIGTERM, then SIGKILL after a grace."""
    for sig, wait_s in ((None, ends_s), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            return
        if sig is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait_s)
