"""Taking down what killed runs left: each leftover's actions in order (find.py built them),
the first that fails stopping that leftover with the reason.

Every action looks again before it acts: a process is signalled only while its PID still
names the process that was found (the same start time), a mount is unmounted only while it is
mounted there, a loop device detached only while its backing file is the one found, a
directory removed only when nothing is mounted inside it and no process works in it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Collection
from pathlib import Path, PurePosixPath

from howfast.errors import HowfastError, UsageError
from howfast.machine.cgroup import remove_if_abandoned
from howfast.machine.packetfilter import PacketFilter
from howfast.store import liveness
from howfast.targets.claim import Claim
from howfast.targets.dirlock import DirectoryLock, lock_directory
from howfast.targets.leftovers import names, registry
from howfast.targets.leftovers.dsm_control import listed_segments
from howfast.targets.leftovers.exec_groups import stop_recorded_groups
from howfast.targets.leftovers.find import Action, Leftover
from howfast.targets.leftovers.machine import (
    PROC,
    RegistryFile,
    parse_mounts,
    read_loops,
    read_process,
    read_processes,
    read_sysv,
    still_there,
    strip_deleted,
)

SERVER_FAST_S = 30  # a fast shutdown writes a checkpoint: on a failing volume it may hang
SERVER_IMMEDIATE_S = 10
PROCESS_TERM_S = 5
# Unmounts and detaches: a device still closing makes them "busy" for a while; a loop device
# detaches once the dirty pages of the filesystem on it have gone through the volume, whose
# every write nbdkit delays (seen: over 10 s on a loaded machine).
RETRY_S = 30
# The most a control segment holds: 16 bytes, then 40 per slot, 64 + 5 per backend slots
# (262143 backends at most): 50 MiB
CONTROL_MAX_BYTES = 64 * 2**20


def remove(leftovers: list[Leftover]) -> list[Path]:
    """Take down every removable leftover; each records whether it was removed or why not.
    The target directories they are in are locked meanwhile, as a run locks them, so that no
    run starts there while cleanup works; one a run took since it was looked at is left
    alone. Returns the target directories something was removed from."""
    locks: dict[str, DirectoryLock | None] = {}
    emptied: set[str] = set()
    try:
        for leftover in leftovers:
            if not leftover.removable:
                continue
            taken = [d for d in leftover.directories if _lock(d, locks) is None]
            if taken:
                leftover.error = f"a run took {taken[0]} meanwhile: left alone"
                continue
            try:
                for action in leftover.actions:
                    ACTIONS[action.op](action)
            except HowfastError as exc:
                leftover.error = str(exc)
            else:
                leftover.removed = True
                emptied.update(leftover.directories)
        for directory in sorted(emptied):  # howfast's marker goes when nothing of ours is left
            Claim(Path(directory), created_marker=True).release()
    finally:
        for lock in locks.values():
            if lock is not None:
                lock.release()
    return [Path(d) for d in sorted(emptied)]


def _lock(directory: str, locks: dict[str, DirectoryLock | None]) -> DirectoryLock | None:
    if directory not in locks:
        try:
            locks[directory] = lock_directory(Path(directory), "target directory")
        except UsageError:
            locks[directory] = None  # held: a run started there
        except OSError:  # gone meanwhile: nothing left there to protect
            locks[directory] = DirectoryLock((0, 0), released=True)
    return locks[directory]


# -- processes ------------------------------------------------------------------------------
def _alive(pid: int, ticks: int | None) -> bool:
    """Whether `pid` is still the process that was found (not one that reuses its PID), and
    not a zombie: one that has ended and waits for its parent to collect it."""
    now = liveness.process_start_ticks(pid)
    return now is not None and (ticks is None or now == ticks) and not liveness.is_zombie(pid)


def _signal(pid: int, ticks: int | None, sig: signal.Signals) -> None:
    if _alive(pid, ticks):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _wait_gone(pid: int, ticks: int | None, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid, ticks):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _working_in(directory: str) -> list[int]:
    return sorted(p.pid for p in read_processes() if p.cwd and names.is_within(p.cwd, directory))


def stop_server(action: Action) -> None:
    """Fast shutdown (SIGINT: a clean one, the server removes its shared memory); immediate
    (SIGQUIT) when it does not end in time; then SIGKILL for what is left in its directory."""
    assert action.pid is not None
    pid, ticks = action.pid, action.ticks
    found = read_process(pid)
    if found is None or not _alive(pid, ticks):
        return  # ended by itself meanwhile
    if found.cwd != action.path:
        raise HowfastError(f"PID {pid} no longer works in {action.path}: left alone")
    for sig, seconds in ((signal.SIGINT, SERVER_FAST_S), (signal.SIGQUIT, SERVER_IMMEDIATE_S)):
        _signal(pid, ticks, sig)
        if _wait_gone(pid, ticks, seconds):
            break
    else:
        _signal(pid, ticks, signal.SIGKILL)
        _wait_gone(pid, ticks, PROCESS_TERM_S)
    deadline = time.monotonic() + SERVER_IMMEDIATE_S  # its backends follow it
    while _working_in(action.path) and time.monotonic() < deadline:
        time.sleep(0.1)
    for left in _working_in(action.path):
        process = read_process(left)
        if process is not None and Path(process.exe or "").name in ("postgres", "postmaster"):
            _signal(left, process.start_ticks, signal.SIGKILL)
    if _alive(pid, ticks):
        raise HowfastError(f"the server (PID {pid}) did not stop")


def stop_process(action: Action) -> None:
    assert action.pid is not None
    for sig in (signal.SIGTERM, signal.SIGKILL):
        _signal(action.pid, action.ticks, sig)
        if _wait_gone(action.pid, action.ticks, PROCESS_TERM_S):
            return
    raise HowfastError(f"PID {action.pid} did not stop{_waiting(action.pid)}")


def _waiting(pid: int) -> str:
    """Why a killed process lives on: one waiting in the kernel (state D) dies only when what
    it waits for ends."""
    if liveness.process_state(pid) != "D":
        return ""
    try:
        wchan = (PROC / str(pid) / "wchan").read_text().strip()
    except OSError:
        wchan = ""
    where = f", in {wchan}" if wchan else ""
    return f": it waits in the kernel (state D{where}) and ends when that does"


def kill_servers(action: Action) -> None:
    """The servers working on a volume being taken down: an immediate shutdown (SIGQUIT),
    SIGKILL 10 s later; their storage is gone, a clean shutdown could not write."""
    for sig in (signal.SIGQUIT, signal.SIGKILL):
        found = [p for p in read_processes() if p.cwd and names.is_within(p.cwd, action.path)]
        for process in found:
            if Path(process.exe or "").name in ("postgres", "postmaster"):
                _signal(process.pid, process.start_ticks, sig)
        deadline = time.monotonic() + SERVER_IMMEDIATE_S
        while _working_in(action.path) and time.monotonic() < deadline:
            time.sleep(0.1)


def stop_exec_groups(action: Action) -> None:
    """What a killed run's exec events left running (exec_groups.py), before its private
    directory goes."""
    stop_recorded_groups(Path(action.path))


def no_processes(action: Action) -> None:
    deadline = time.monotonic() + RETRY_S  # those just stopped may still be leaving
    while (left := _working_in(action.path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if left:
        raise HowfastError(
            f"processes still work in {action.path} (PIDs {', '.join(map(str, left))}): left alone"
        )


# -- mounts and devices ----------------------------------------------------------------------
def _mount_points() -> list[str]:
    try:
        return [m.point for m in parse_mounts((PROC / "self/mounts").read_text())]
    except OSError:
        return []


def _retry(argv: list[str], what: str) -> None:
    deadline = time.monotonic() + RETRY_S
    while True:
        out = subprocess.run(argv, capture_output=True, text=True, check=False)
        if out.returncode == 0:
            return
        if time.monotonic() > deadline:
            said = " ".join((out.stderr or out.stdout).strip().splitlines()[-2:])
            raise HowfastError(f"{what} failed (exit {out.returncode}): {said}")
        time.sleep(0.3)


def umount(action: Action) -> None:
    if action.path in _mount_points():
        _retry(["umount", action.path], f"unmounting {action.path}")


def _backing(device: str) -> str | None:
    name = Path(device).name
    try:
        return strip_deleted(Path(f"/sys/block/{name}/loop/backing_file").read_text().strip())
    except OSError:
        return None


def backed_by(now: str | None, backing: str, mount_points: Collection[str]) -> bool:
    """Whether a loop device whose backing file reads `now` in sysfs is still on the file
    `backing` it was found with. The volume's nbdfuse, stopped first, may unmount its FUSE
    file lazily on its way out (libfuse does, as root, when it has time to): a loop device on
    that file then names it from the detached mount's root ("/nbd"). That form counts only
    once the FUSE mount point is gone from `mount_points`. Pure."""
    if now is None or now == backing:
        return now is not None
    file = PurePosixPath(backing)
    return now == f"/{file.name}" and str(file.parent) not in mount_points


def _still_backed_by(device: str, backing: str) -> bool:
    return backed_by(_backing(device), backing, _mount_points())


def detach_loop(action: Action) -> None:
    if not _still_backed_by(action.path, action.extra):
        return  # detached already, or now another file's: not ours
    _retry(["losetup", "--detach", action.path], f"detaching {action.path}")
    deadline = time.monotonic() + RETRY_S  # detaching completes when the last user closes it
    while _still_backed_by(action.path, action.extra) and time.monotonic() < deadline:
        time.sleep(0.1)


def detach_loops(action: Action) -> None:
    """Every loop device whose backing file is in the volume's private directory (the FUSE
    file), as they are now."""
    for loop in read_loops():
        if names.is_within(loop.backing, action.path):
            detach_loop(Action("detach-loop", loop.device, extra=loop.backing))


def unmount_fuse(action: Action) -> None:
    """fusermount3 -u, the documented way; umount as root when it is missing. A FUSE file
    whose nbdfuse died ("Transport endpoint is not connected") unmounts the same way."""
    if action.path not in _mount_points():
        return
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    argv = [tool, "-u", action.path] if tool else ["umount", action.path]
    _retry(argv, f"unmounting the FUSE file {action.path}")


# -- files and cgroups ----------------------------------------------------------------------
def rmtree(action: Action) -> None:
    path = action.path
    if not os.path.lexists(path):
        return
    mounted = [m for m in _mount_points() if names.is_within(m, path)]
    if mounted:
        raise HowfastError(f"{mounted[0]} is still mounted: {path} is left")
    try:
        shutil.rmtree(path)
    except OSError as exc:
        raise HowfastError(f"cannot remove {path}: {exc.strerror or exc}") from None


def rmdir_cgroup(action: Action) -> None:
    why = remove_if_abandoned(Path(action.path), timeout_s=RETRY_S)
    if why is not None:
        raise HowfastError(f"cgroup {action.path} is left: {why}")


# -- shared memory of killed servers ----------------------------------------------------------
def _server_gone(action: Action, data_dir: str) -> None:
    """Raise unless the server that made a segment is gone, and every process of its data
    directory (a backend still leaving) with it, within RETRY_S."""
    assert action.pid is not None
    if _alive(action.pid, action.ticks):
        raise HowfastError(f"its server (PID {action.pid}) still runs: left alone")
    if data_dir:
        no_processes(Action("no-processes", data_dir))


def remove_sysv(action: Action) -> None:
    """A killed server's System V segment: removed (ipcrm) only while its id still names
    the segment that server made (same key and creator) and nothing is attached to it."""
    shmid, key = (int(x) for x in action.extra.split(":"))
    _server_gone(action, action.path)
    deadline = time.monotonic() + RETRY_S
    while True:
        segment = read_sysv().get(shmid)
        if segment is None or (segment.key, segment.creator) != (key, action.pid):
            return  # removed meanwhile (a server started on its data directory does)
        if segment.attached == 0:
            break
        if time.monotonic() > deadline:
            raise HowfastError(
                f"System V segment {shmid}: {segment.attached} processes are still attached"
            )
        time.sleep(0.2)
    try:
        out = subprocess.run(
            ["ipcrm", "-m", str(shmid)], capture_output=True, text=True, check=False
        )
    except OSError as exc:
        raise HowfastError(
            f"cannot run ipcrm to remove System V segment {shmid}: {exc.strerror} "
            "(it comes with util-linux)"
        ) from None
    if out.returncode != 0 and shmid in read_sysv():
        said = (out.stderr or out.stdout).strip()
        raise HowfastError(f"removing System V segment {shmid} failed: {said}")


def unlink_dsm(action: Action) -> None:
    """A killed server's /dev/shm/PostgreSQL.* file (dynamic shared memory): only its own
    processes map it, and they are all gone first. When it is the server's control segment
    (the one its postmaster maps), the segments it lists go first, as PostgreSQL removes
    them: its own, made later by its processes (a file of another owner is left)."""
    if not os.path.lexists(action.path):
        return
    _server_gone(action, action.extra)
    try:
        with open(action.path, "rb") as control:
            owner = os.fstat(control.fileno()).st_uid
            listed = listed_segments(control.read(CONTROL_MAX_BYTES))
    except OSError:
        listed, owner = [], -1
    for path in [*listed, action.path]:
        try:
            if path == action.path or os.lstat(path).st_uid == owner:
                os.unlink(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise HowfastError(f"cannot remove {path}: {exc.strerror}") from None


def remove_packet_filter(action: Action) -> None:
    """A `partition` event's iptables chain, and the jump to it: by its name, which howfast's
    chains alone have (nothing else of the packet filter is touched)."""
    packets = PacketFilter()
    why = packets.unusable()
    if why is not None:
        raise HowfastError(f"cannot remove the iptables chain {action.path}: {why}")
    packets.remove(action.path)


def forget_finished(files: list[RegistryFile]) -> list[str]:
    """The registry files of howfast processes that are gone and of which nothing is left
    (all taken down): removed. Returns their paths."""
    sysv = read_sysv()
    removed = []
    for found in files:
        if found.owner_state != "gone":
            continue
        try:
            record = registry.parse_record(Path(found.path).read_text(errors="replace"))
        except OSError:
            continue
        if not any(still_there(item, sysv) for item in record.items):
            with contextlib.suppress(OSError):
                os.unlink(found.path)
                removed.append(found.path)
    return removed


def unlink_lock(action: Action) -> None:
    """A cgroup owner lock whose cgroup is gone: removed while holding it, so that a howfast
    taking it at this moment keeps it."""
    try:
        fd = os.open(action.path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise HowfastError(f"cannot open {action.path}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.unlink(action.path)
    except OSError as exc:
        raise HowfastError(f"{action.path} is left: {exc.strerror}") from None
    finally:
        os.close(fd)


ACTIONS = {
    "stop-server": stop_server,
    "stop-process": stop_process,
    "no-processes": no_processes,
    "stop-exec-groups": stop_exec_groups,
    "kill-servers": kill_servers,
    "umount": umount,
    "detach-loop": detach_loop,
    "detach-loops": detach_loops,
    "unmount-fuse": unmount_fuse,
    "rmtree": rmtree,
    "rmdir-cgroup": rmdir_cgroup,
    "unlink": unlink_lock,
    "remove-sysv": remove_sysv,
    "unlink-dsm": unlink_dsm,
    "remove-packet-filter": remove_packet_filter,
}
