"""A memory-limited cgroup for the local server, so that its page cache is capped and a
database larger than the cap is really larger than memory (emulating a smaller machine).

Works with the cgroup v1 memory controller or cgroup v2 `memory.max`, whichever this machine
offers; `detect()` says which, or why neither can be used, so callers refuse `--memory` with
that reason instead of silently running without a cap. Parsers are pure; the class is thin.
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


def detect(root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> CgroupSupport:
    if proc_cgroup is None:
        try:
            proc_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            proc_cgroup = ""
    own = parse_proc_cgroup(proc_cgroup)
    v2_controllers = root / "cgroup.controllers"
    if v2_controllers.exists() and "memory" in v2_controllers.read_text().split():
        parent = root / own.get("", "/").lstrip("/")
        if not os.access(parent, os.W_OK):
            return CgroupSupport(None, None, f"cgroup v2 at {parent} is not writable (not root?)")
        return CgroupSupport("v2", parent, f"cgroup v2 memory controller under {parent}")
    v1_root = root / "memory"
    if v1_root.is_dir():
        parent = v1_root / own.get("memory", "/").lstrip("/")
        if not parent.is_dir():
            parent = v1_root
        if not os.access(parent, os.W_OK):
            why = f"cgroup v1 memory at {parent} is not writable (not root?)"
            return CgroupSupport(None, None, why)
        return CgroupSupport("v1", parent, f"cgroup v1 memory controller under {parent}")
    return CgroupSupport(None, None, "no cgroup memory controller is mounted")


class MemoryCgroup:
    """One cgroup that howfast creates, puts the server in, and removes."""

    def __init__(self, support: CgroupSupport, name: str, limit_bytes: int) -> None:
        if support.version is None or support.parent is None:
            raise HowfastError(
                f"--memory needs a cgroup memory controller: {support.reason}",
                "run as root on a machine with cgroups, or drop --memory",
            )
        self.version = support.version
        self.parent = support.parent
        self.path = support.parent / name
        self.limit_bytes = limit_bytes
        self._created = False
        self._owner: int | None = None  # the fd of its owner lock (see remove_abandoned)

    def create(self) -> None:
        if self.version == "v2":
            self._enable_memory_in_parent()
        self._owner = own(self.path.name)
        try:
            self.path.mkdir()
        except OSError as exc:
            disown(self.path.name, self._owner)
            self._owner = None
            raise HowfastError(f"cannot create cgroup {self.path}: {exc.strerror}") from None
        self._created = True
        limit_file = "memory.max" if self.version == "v2" else "memory.limit_in_bytes"
        try:
            (self.path / limit_file).write_text(str(self.limit_bytes))
            if self.version == "v2" and (self.path / "memory.swap.max").exists():
                # Swapping the cache out would hide the cap's effect.
                (self.path / "memory.swap.max").write_text("0")
        except OSError as exc:
            self.remove()
            raise HowfastError(f"cannot set the memory limit of {self.path}: {exc}") from None

    def _enable_memory_in_parent(self) -> None:
        control = self.parent / "cgroup.subtree_control"
        if "memory" in control.read_text().split():
            return
        try:
            control.write_text("+memory")
        except OSError as exc:
            raise HowfastError(
                f"cannot enable the memory controller below {self.parent}: {exc.strerror}",
                "cgroup v2 needs a delegated subtree (e.g. run howfast in its own systemd scope)",
            ) from None

    def spawn(self, start: Callable[[], T]) -> T:
        """Call `start()` (which forks the server) with this process temporarily inside the
        cgroup, so the server and all it forks are born inside; then move back. Children
        inherit the cgroup at fork, which closes the window a later move would leave."""
        procs = self.path / "cgroup.procs"
        home = self.parent / "cgroup.procs"
        with _spawn_lock:
            procs.write_text(str(os.getpid()))
            try:
                return start()
            finally:
                home.write_text(str(os.getpid()))

    def pids(self) -> list[int]:
        try:
            text = (self.path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

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

    def remove(self, timeout_s: float = 10.0) -> None:
        """Remove the cgroup once its processes are gone (the caller stops them first)."""
        if not self._created:
            return
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.path.rmdir()
                self._created = False
                self._disown()
                return
            except FileNotFoundError:
                self._created = False
                self._disown()
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise HowfastError(
                        f"cannot remove cgroup {self.path}: {exc.strerror}"
                    ) from None
                with contextlib.suppress(OSError):
                    # v1 keeps charged page cache; emptying it lets rmdir succeed sooner.
                    if self.version == "v1":
                        (self.path / "memory.force_empty").write_text("0")
                time.sleep(0.1)

    def _disown(self) -> None:
        if self._owner is not None:
            disown(self.path.name, self._owner)
            self._owner = None


# A howfast killed with SIGKILL leaves its memory cgroup behind, empty once its server is
# stopped. Each cgroup howfast creates has an owner lock, flock'ed by the creating process for
# the cgroup's life (the kernel releases it when that process dies): a later howfast removes
# the empty `howfast-XXXXXXXX` cgroups whose lock it can take. Cgroups without a lock file
# (not made this way) are left alone.
_ABANDONED_NAME = re.compile(r"howfast-[0-9a-f]{8}")


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
    """Remove the empty memory cgroups under `parent` that a killed howfast left; return them."""
    removed = []
    for path in sorted(parent.glob("howfast-*")):
        lock = owner_lock_path(path.name)
        if not _ABANDONED_NAME.fullmatch(path.name) or not path.is_dir() or not lock.exists():
            continue
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # its howfast is gone
            if (path / "cgroup.procs").read_text().strip():
                continue  # its server still runs: not ours to kill
            path.rmdir()
        except OSError:
            continue
        finally:
            os.close(fd)
        lock.unlink(missing_ok=True)
        removed.append(path)
    return removed


def detect_io(root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> CgroupSupport:
    """Where I/O limits can be set: cgroup v2's io controller (io.max) or v1's blkio
    (blkio.throttle.*), beside howfast's own cgroup; or why neither can be used."""
    if proc_cgroup is None:
        try:
            proc_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            proc_cgroup = ""
    own = parse_proc_cgroup(proc_cgroup)
    v2_controllers = root / "cgroup.controllers"
    if v2_controllers.exists() and "io" in v2_controllers.read_text().split():
        parent = root / own.get("", "/").lstrip("/")
        if not os.access(parent, os.W_OK):
            return CgroupSupport(None, None, f"cgroup v2 at {parent} is not writable (not root?)")
        return CgroupSupport("v2", parent, f"cgroup v2 io controller under {parent}")
    v1_root = root / "blkio"
    if (v1_root / "blkio.throttle.write_iops_device").exists():
        parent = v1_root / own.get("blkio", "/").lstrip("/")
        if not parent.is_dir():
            parent = v1_root
        if not os.access(parent, os.W_OK):
            return CgroupSupport(None, None, f"cgroup v1 blkio at {parent} is not writable")
        return CgroupSupport("v1", parent, f"cgroup v1 blkio controller under {parent}")
    return CgroupSupport(None, None, "no cgroup I/O controller (v2 io or v1 blkio throttling)")


class IoCgroup:
    """A cgroup with I/O limits on one device that howfast creates, runs the server (and the
    storage probes) in, and removes. `lines` are what throttle_lines built."""

    def __init__(self, support: CgroupSupport, name: str, lines: dict[str, str]) -> None:
        if support.version is None or support.parent is None:
            raise HowfastError(f"I/O limits need a cgroup I/O controller: {support.reason}")
        self.version = support.version
        self.parent = support.parent
        self.path = support.parent / name
        self.lines = lines
        self._created = False

    def create(self) -> None:
        if self.version == "v2":
            control = self.parent / "cgroup.subtree_control"
            if "io" not in control.read_text().split():
                try:
                    control.write_text("+io")
                except OSError as exc:
                    raise HowfastError(
                        f"cannot enable the io controller below {self.parent}: {exc.strerror}"
                    ) from None
        try:
            self.path.mkdir()
        except OSError as exc:
            raise HowfastError(f"cannot create cgroup {self.path}: {exc.strerror}") from None
        self._created = True
        try:
            for name, line in self.lines.items():
                (self.path / name).write_text(line)
        except OSError as exc:
            self.remove()
            raise HowfastError(f"cannot set I/O limits in {self.path}: {exc}") from None

    def spawn(self, start: Callable[[], T]) -> T:
        """Like MemoryCgroup.spawn: the child is born inside the cgroup."""
        procs = self.path / "cgroup.procs"
        home = self.parent / "cgroup.procs"
        with _spawn_lock:
            procs.write_text(str(os.getpid()))
            try:
                return start()
            finally:
                home.write_text(str(os.getpid()))

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def remove(self, timeout_s: float = 10.0) -> None:
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
                time.sleep(0.1)
                continue
            self._created = False
            return
