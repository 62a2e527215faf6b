"""Cgroups howfast creates for the servers and tools it starts: a memory cap (`--memory`: the
page cache is capped, so a database larger than the cap is really larger than memory) and I/O
limits or counting on a device (emulated volumes, fleets, the server's own I/O).

Works with cgroup v1 or v2, whichever this machine offers; `detect()` / `detect_io()` say
which, or why neither can be used, so callers refuse with that reason instead of silently
running without the limit. Parsers are pure; the classes are thin.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from howfast.errors import HowfastError
from howfast.iolimits import (
    COUNTING_FILE,
    IoCounters,
    counting_line,
    parse_v1_counters,
    parse_v2_counters,
)

CGROUP_ROOT = Path("/sys/fs/cgroup")
_spawn_lock = threading.RLock()  # re-entrant: a server may be spawned into two cgroups
T = TypeVar("T")


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """/proc/self/cgroup lines 'id:controllers:path' -> {controller: path}; v2 is ''."""
    paths: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            paths[controller] = parts[2]
    return paths


@dataclass(frozen=True)
class CgroupSupport:
    version: str | None  # "v1", "v2", or None when unusable
    parent: Path | None  # where our cgroups are created: beside howfast's own cgroup
    reason: str  # what was found, or why it cannot be used


def _detect(
    v2_controller: str, v1_dir: str, v1_probe: str | None, root: Path, proc_cgroup: str | None
) -> CgroupSupport:
    """Where cgroups of a controller can be made beside howfast's own: cgroup v2 when it offers
    the controller, else v1's hierarchy for it (`v1_probe`: a file that must exist there)."""
    if proc_cgroup is None:
        try:
            proc_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            proc_cgroup = ""
    own = parse_proc_cgroup(proc_cgroup)
    v2_controllers = root / "cgroup.controllers"
    if v2_controllers.exists() and v2_controller in v2_controllers.read_text().split():
        parent = root / own.get("", "/").lstrip("/")
        if not os.access(parent, os.W_OK):
            return CgroupSupport(None, None, f"cgroup v2 at {parent} is not writable (not root?)")
        return CgroupSupport("v2", parent, f"cgroup v2 {v2_controller} controller under {parent}")
    v1_root = root / v1_dir
    if v1_root.is_dir() and (v1_probe is None or (v1_root / v1_probe).exists()):
        parent = v1_root / own.get(v1_dir, "/").lstrip("/")
        if not parent.is_dir():
            parent = v1_root
        if not os.access(parent, os.W_OK):
            why = f"cgroup v1 {v1_dir} at {parent} is not writable (not root?)"
            return CgroupSupport(None, None, why)
        return CgroupSupport("v1", parent, f"cgroup v1 {v1_dir} controller under {parent}")
    return CgroupSupport(None, None, f"no cgroup {v2_controller} controller is mounted")


def detect(root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> CgroupSupport:
    """The memory controller: v2 memory.max, or v1 memory."""
    return _detect("memory", "memory", None, root, proc_cgroup)


def detect_io(root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> CgroupSupport:
    """The I/O controller: v2 io (io.max), or v1 blkio with throttling."""
    found = _detect("io", "blkio", "blkio.throttle.write_iops_device", root, proc_cgroup)
    if found.version is None and found.reason.startswith("no cgroup"):
        return CgroupSupport(None, None, "no cgroup I/O controller (v2 io or v1 blkio throttling)")
    return found


class Cgroup:
    """One cgroup that howfast creates, starts processes in, and removes. Subclasses write
    their controller's files after the directory exists (`configure`)."""

    controller = ""  # as cgroup v2's cgroup.subtree_control names it

    def __init__(self, support: CgroupSupport, name: str) -> None:
        assert support.version is not None and support.parent is not None
        self.version = support.version
        self.parent = support.parent
        self.path = support.parent / name
        self._created = False
        self._owner: int | None = None  # the owner lock's descriptor while it exists

    def create(self) -> None:
        if self.version == "v2":
            self._enable_in_parent()
        self._owner = own(self.path.name)
        try:
            self.path.mkdir()
        except OSError as exc:
            self._disown()
            raise HowfastError(f"cannot create cgroup {self.path}: {exc.strerror}") from None
        self._created = True
        try:
            self.configure()
        except OSError as exc:
            self.remove()
            raise HowfastError(f"cannot set the limits of {self.path}: {exc}") from None

    def configure(self) -> None:
        """Write the controller's settings (the directory exists)."""

    def _enable_in_parent(self) -> None:
        control = self.parent / "cgroup.subtree_control"
        if self.controller in control.read_text().split():
            return
        try:
            control.write_text(f"+{self.controller}")
        except OSError as exc:
            raise HowfastError(
                f"cannot enable the {self.controller} controller below {self.parent}: "
                f"{exc.strerror}",
                "cgroup v2 needs a delegated subtree (e.g. run howfast in its own systemd scope)",
            ) from None

    def spawn(self, start: Callable[[], T]) -> T:
        """Call `start()` (which forks a process) with this process temporarily inside the
        cgroup, so the child and all it forks are born inside; then move back. Children
        inherit the cgroup at fork, which closes the window a later move would leave."""
        with _spawn_lock:
            try:  # the move in too: a Ctrl-C raised as its write returns must still move back
                (self.path / "cgroup.procs").write_text(str(os.getpid()))
                return start()
            finally:
                self._move_home()

    def _move_home(self) -> None:
        """This process back to the parent cgroup, even when a signal's exception (Ctrl-C)
        cuts a first try short: left inside, it would be among the processes its cleanup
        SIGKILLs (pids())."""
        interrupted: BaseException | None = None
        for _ in range(3):
            try:
                (self.parent / "cgroup.procs").write_text(str(os.getpid()))
                break
            except OSError:
                raise
            except BaseException as exc:  # raised by a signal handler between two bytecodes
                interrupted = interrupted or exc
        if interrupted is not None:
            raise interrupted

    def pids(self) -> list[int]:
        """The processes in the cgroup, for the caller to stop; never this process itself: if
        a signal left it inside (between a move and the try that moves it back), it is moved
        back first. (A loaded test run saw howfast end by SIGKILL, saying nothing, after a
        Ctrl-C during its standby's set-up: what its cleanup of that cgroup would do.)"""
        try:
            found = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []
        if os.getpid() in found:
            with contextlib.suppress(OSError):  # then removing the cgroup says it is busy
                self._move_home()
            found.remove(os.getpid())
        return found

    def remove(self, timeout_s: float = 10.0) -> None:
        """Remove the cgroup once its processes are gone (the caller stops them first)."""
        if not self._created:
            return
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.path.rmdir()
            except FileNotFoundError:
                pass
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise HowfastError(
                        f"cannot remove cgroup {self.path}: {exc.strerror}"
                    ) from None
                self.before_retry()
                time.sleep(0.1)
                continue
            self._created = False
            self._disown()
            return

    def _disown(self) -> None:
        if self._owner is not None:
            disown(self.path.name, self._owner)
            self._owner = None

    def before_retry(self) -> None:
        """Called while rmdir says busy."""


class MemoryCgroup(Cgroup):
    """The --memory cap of a server: its page cache is capped too."""

    controller = "memory"

    def __init__(self, support: CgroupSupport, name: str, limit_bytes: int) -> None:
        if support.version is None or support.parent is None:
            raise HowfastError(
                f"--memory needs a cgroup memory controller: {support.reason}",
                "run as root on a machine with cgroups, or drop --memory",
            )
        super().__init__(support, name)
        self.limit_bytes = limit_bytes

    def configure(self) -> None:
        limit_file = "memory.max" if self.version == "v2" else "memory.limit_in_bytes"
        (self.path / limit_file).write_text(str(self.limit_bytes))
        if self.version == "v2" and (self.path / "memory.swap.max").exists():
            # Swapping the cache out would hide the cap's effect.
            (self.path / "memory.swap.max").write_text("0")

    def before_retry(self) -> None:
        if self.version == "v1":  # v1 keeps charged page cache; emptying it frees the rmdir
            with contextlib.suppress(OSError):
                (self.path / "memory.force_empty").write_text("0")

    def usage_bytes(self) -> int | None:
        name = "memory.current" if self.version == "v2" else "memory.usage_in_bytes"
        try:
            return int((self.path / name).read_text())
        except (OSError, ValueError):
            return None

    def peak_bytes(self) -> int | None:
        name = "memory.peak" if self.version == "v2" else "memory.max_usage_in_bytes"
        try:
            return int((self.path / name).read_text())
        except (OSError, ValueError):
            return None

    def reset_peak(self) -> bool:
        """Start the peak over, so that it covers one step. cgroup v1 only: v2's memory.peak
        resets only for the open file that was written (kernel 6.12+)."""
        if self.version != "v1":
            return False
        try:
            (self.path / "memory.max_usage_in_bytes").write_text("0")
        except OSError:
            return False
        return True


class IoCgroup(Cgroup):
    """A cgroup with I/O limits on one device (`lines`: what throttle_lines built; none: it
    only counts), in which howfast starts a server or the storage probes."""

    controller = "io"

    def __init__(self, support: CgroupSupport, name: str, lines: dict[str, str]) -> None:
        if support.version is None or support.parent is None:
            raise HowfastError(f"I/O limits need a cgroup I/O controller: {support.reason}")
        super().__init__(support, name)
        self.lines = lines

    def configure(self) -> None:
        for name, line in self.lines.items():
            (self.path / name).write_text(line)

    def count_on(self, devnums: list[str]) -> str | None:
        """Make sure this cgroup's counters count on these whole disks (see
        iolimits.COUNTING_FILE: cgroup v1 counts nothing on a disk that never had a throttle
        rule). None when they do, else why not. cgroup v2's io.stat always counts."""
        if self.version != "v1":
            return None
        problems = []
        for devnum in dict.fromkeys(devnums):
            rules = self.path / COUNTING_FILE
            try:
                line = counting_line(devnum, rules.read_text())
                if line is not None:
                    rules.write_text(line)
            except OSError as exc:
                problems.append(f"{devnum}: {exc.strerror or exc}")
        if problems:
            return (
                "cannot turn cgroup v1 I/O counting on for "
                + ", ".join(problems)
                + " (a disk without a throttle rule is not counted on Linux 6.10 and later)"
            )
        return None

    def counters(self, devnum: str) -> IoCounters:
        """What this cgroup's processes have asked of the device so far."""
        try:
            if self.version == "v2":
                return parse_v2_counters((self.path / "io.stat").read_text(), devnum)
            return parse_v1_counters(
                (self.path / "blkio.throttle.io_serviced").read_text(),
                (self.path / "blkio.throttle.io_service_bytes").read_text(),
                devnum,
            )
        except OSError:
            return IoCounters()


# A howfast killed with SIGKILL leaves its cgroups behind, empty once their processes are
# stopped. Each cgroup howfast creates has an owner lock, flock'ed by the creating process for
# the cgroup's life (the kernel releases it when that process dies): a later howfast removes
# the empty `howfast-...` cgroups whose lock it can take. Cgroups without a lock file (not
# made this way) are left alone.
_ABANDONED_NAME = re.compile(r"howfast-(?:[a-z]+-)?[0-9a-f]{8}")


def owner_lock_path(name: str) -> Path:
    base = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else Path(tempfile.gettempdir())
    return base / f"howfast-cgroup-{name}.lock"


def own(name: str) -> int:
    fd = os.open(owner_lock_path(name), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def disown(name: str, fd: int) -> None:
    with contextlib.suppress(OSError):
        owner_lock_path(name).unlink()
    os.close(fd)


def remove_abandoned(parent: Path) -> list[Path]:
    """Remove the empty cgroups under `parent` that a killed howfast left; return them."""
    removed = []
    for path in sorted(parent.glob("howfast-*")):
        abandoned = _ABANDONED_NAME.fullmatch(path.name) and path.is_dir()
        if abandoned and remove_if_abandoned(path) is None:
            removed.append(path)
    return removed


def remove_if_abandoned(path: Path, timeout_s: float = 0.0) -> str | None:
    """Remove one cgroup a killed howfast left, if its owner lock is free and it is empty
    (for up to `timeout_s`: the processes of a server just stopped may still be leaving);
    None when it is removed, else why it is not."""
    lock = owner_lock_path(path.name)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        if not path.exists():
            return None  # removed meanwhile (another howfast tidied it: the lock goes last)
        return f"it has no owner lock {lock}: not made by this howfast"
    deadline = time.monotonic() + timeout_s
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # its howfast is gone
        except OSError:
            return "its owner lock is held: its howfast still runs"
        while True:
            try:
                procs = (path / "cgroup.procs").read_text().split()
                if not procs:
                    path.rmdir()
                    break
                problem = f"its processes still run (PIDs {', '.join(procs)})"  # not ours to kill
            except FileNotFoundError:
                break  # gone already
            except OSError as exc:
                problem = f"cannot remove it: {exc.strerror}"
            if time.monotonic() >= deadline:
                return problem
            time.sleep(0.2)
    finally:
        os.close(fd)
    lock.unlink(missing_ok=True)
    return None
