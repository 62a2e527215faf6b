"""Reading this machine for `howfast cleanup`: what runs, what is mounted, which loop devices
exist, who holds which lock, and the directories howfast names. Thin readers; the parsers are
pure and everything that decides is in find.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from howfast.machine.cgroup import CgroupSupport, detect, detect_io, owner_lock_path
from howfast.store import liveness
from howfast.targets.claim import MARKER
from howfast.targets.dirlock import INFO, holder_text
from howfast.targets.leftovers import marks, names, registry

PROC = Path("/proc")


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    start_ticks: int | None
    uid: int | None
    argv: tuple[str, ...]
    cwd: str | None  # without the kernel's " (deleted)"
    exe: str | None
    state: str = ""  # R, S, D, Z...: a zombie has ended, whatever its PID still shows


@dataclass(frozen=True)
class Mount:
    source: str
    point: str
    fstype: str
    options: str = ""


@dataclass(frozen=True)
class Loop:
    device: str  # /dev/loopN
    backing: str  # the backing file's path, without the kernel's " (deleted)"


@dataclass(frozen=True)
class PrivateDir:
    """A `howfast-...` directory in /dev/shm or the temp directory."""

    path: str
    owner: marks.OwnerRecord | None
    owner_state: str  # "gone", "alive" or "unknown": of its owner record's writer
    mtime: float
    owner_started: float | None = None  # a work directory's named PID: when it started


@dataclass(frozen=True)
class Entry:
    """A `howfast-...` directory inside a target directory."""

    path: str
    kept: bool  # carries the kept mark, or a kept cluster's server.log (before the mark)
    size_bytes: int = 0  # an emulated volume's image, as allocated
    inner: tuple[str, ...] = ()  # the cluster directories on a mounted emulated volume


@dataclass(frozen=True)
class TargetDir:
    path: str
    owned: bool  # carries howfast's ownership marker (targets/claim.py)
    holder: str | None  # who holds its run lock, in words; None: nobody does
    entries: tuple[Entry, ...] = ()
    members: tuple[TargetDir, ...] = ()  # a fleet's instance directories, each locked
    holder_pid: int | None = None


@dataclass(frozen=True)
class CgroupDir:
    path: str
    lock_held: bool  # its owner lock is held: the howfast that made it runs
    lock_exists: bool
    pids: tuple[int, ...]


@dataclass(frozen=True)
class LockFile:
    """A cgroup owner lock whose cgroup is gone (its howfast died between the two removals)."""

    path: str
    held: bool


@dataclass(frozen=True)
class SysvSegment:
    """A System V shared memory segment, as /proc/sysvipc/shm shows it."""

    shmid: int
    key: int
    creator: int  # cpid: the process that made it (a postmaster)
    attached: int  # nattch


@dataclass(frozen=True)
class RegistryFile:
    """A howfast process's registry file (registry.py): whether that process still runs, and
    what it names that is still there."""

    path: str
    record: registry.Record
    owner_state: str  # "gone", "alive" or "unknown", as an owner record's
    present: tuple[registry.Owned, ...]


@dataclass
class Snapshot:
    processes: list[Process] = field(default_factory=list)
    mounts: list[Mount] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    private_dirs: list[PrivateDir] = field(default_factory=list)
    target_dirs: list[TargetDir] = field(default_factory=list)
    cgroups: list[CgroupDir] = field(default_factory=list)
    lock_files: list[LockFile] = field(default_factory=list)
    users: dict[int, str] = field(default_factory=dict)  # the servers' users, by uid
    euid: int = 0
    registry: list[RegistryFile] = field(default_factory=list)
    sysv: dict[int, SysvSegment] = field(default_factory=dict)


# -- pure parsers ------------------------------------------------------------------------
def unescape_mount_path(text: str) -> str:
    """/proc/self/mounts writes space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        text = text.replace(code, char)
    return text


def parse_mounts(text: str) -> list[Mount]:
    found = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4:
            found.append(
                Mount(
                    unescape_mount_path(fields[0]),
                    unescape_mount_path(fields[1]),
                    fields[2],
                    fields[3],
                )
            )
    return found


def parse_flock_holders(text: str) -> dict[tuple[int, int, int], int]:
    """/proc/locks -> {(major, minor, inode): PID} of the FLOCK write locks (howfast's kind).
    Device numbers are hexadecimal there, the inode decimal."""
    held: dict[tuple[int, int, int], int] = {}
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "->":  # a waiter, not a holder
            continue
        if len(fields) < 6 or fields[1] != "FLOCK" or fields[3] != "WRITE":
            continue
        try:
            major, minor, inode = fields[5].split(":")
            held[(int(major, 16), int(minor, 16), int(inode))] = int(fields[4])
        except ValueError:
            continue
    return held


def parse_sysv_shm(text: str) -> dict[int, SysvSegment]:
    """/proc/sysvipc/shm: a header, then key shmid perms size cpid lpid nattch ... per line."""
    found = {}
    for line in text.splitlines()[1:]:
        fields = line.split()
        try:
            key, shmid, cpid, nattch = (
                int(fields[0]),
                int(fields[1]),
                int(fields[4]),
                int(fields[6]),
            )
        except (IndexError, ValueError):
            continue
        found[shmid] = SysvSegment(shmid, key, cpid, nattch)
    return found


def strip_deleted(path: str) -> str:
    return path.removesuffix(" (deleted)")


# -- readers -------------------------------------------------------------------------------
def read_process(pid: int, proc: Path = PROC) -> Process | None:
    base = proc / str(pid)
    try:
        stat = (base / "stat").read_text()
        argv = tuple(
            a.decode(errors="replace") for a in (base / "cmdline").read_bytes().split(b"\0") if a
        )
        status = (base / "status").read_text()
    except OSError:
        return None
    after = stat[stat.rindex(")") + 2 :].split()
    uid = next(
        (int(line.split()[1]) for line in status.splitlines() if line.startswith("Uid:")), None
    )
    cwd = exe = None
    with contextlib.suppress(OSError):
        cwd = strip_deleted(os.readlink(base / "cwd"))
    with contextlib.suppress(OSError):
        exe = strip_deleted(os.readlink(base / "exe"))
    return Process(pid, int(after[1]), int(after[19]), uid, argv, cwd, exe, after[0])


def read_processes(proc: Path = PROC) -> list[Process]:
    found = []
    for entry in proc.iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            process = read_process(int(entry.name), proc)
            if process is not None:
                found.append(process)
    return found


def read_loops(sys_block: Path = Path("/sys/block")) -> list[Loop]:
    found = []
    for backing in sorted(sys_block.glob("loop*/loop/backing_file")):
        with contextlib.suppress(OSError):
            path = backing.read_text().strip()
            found.append(Loop(f"/dev/{backing.parent.parent.name}", strip_deleted(path)))
    return found


def flock_holders() -> dict[tuple[int, int, int], int] | None:
    try:
        return parse_flock_holders((PROC / "locks").read_text())
    except OSError:
        return None


def lock_holder(path: Path, holders: dict[tuple[int, int, int], int] | None) -> str | None:
    """Who holds the run lock of `path` (a directory) or an owner lock file, in words; None
    when nobody does. Read from /proc/locks, without taking the lock (a run starting at this
    moment must not find it taken by cleanup)."""
    try:
        st = path.stat()
    except OSError:
        return None
    if holders is None:  # no /proc/locks: try the lock itself, and let go at once
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return "a howfast process"
        finally:
            os.close(fd)
        return None
    pid = holders.get((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino))
    if pid is None:
        return None
    info = path / INFO if path.is_dir() else None
    doc: dict[str, object] = {"pid": pid}
    if info is not None:
        with contextlib.suppress(OSError, ValueError):
            written = json.loads(info.read_text())
            if isinstance(written, dict) and written.get("pid") == pid:
                doc = written
    return holder_text(doc)


def owner_state(record: marks.OwnerRecord | None, here: liveness.Writer) -> str:
    if record is None or record.writer is None:
        return "unknown"
    if liveness.is_gone(record.writer, here):
        return "gone"
    if record.writer.host == here.host and liveness.is_zombie(record.writer.pid):
        return "gone"
    same = record.writer.host == here.host and record.writer.pid_ns == here.pid_ns
    return "alive" if same else "unknown"


def process_started(pid: int) -> float | None:
    """When process `pid` started, in seconds since the epoch."""
    ticks = liveness.process_start_ticks(pid)
    if ticks is None:
        return None
    try:
        btime = next(
            int(line.split()[1])
            for line in (PROC / "stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, StopIteration, ValueError):
        return None
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def private_bases() -> list[Path]:
    """Where howfast makes its private directories: /dev/shm, and the temp directory when
    /dev/shm cannot be used or is on the storage under test."""
    bases = [Path("/dev/shm"), Path(tempfile.gettempdir())]
    return [b for b in dict.fromkeys(bases) if b.is_dir()]


def read_sysv() -> dict[int, SysvSegment]:
    return parse_sysv_shm(_read(PROC / "sysvipc/shm"))


def still_there(item: registry.Owned, sysv: dict[int, SysvSegment]) -> bool:
    """Whether a thing a registry file names is still there: a System V segment only while
    its id names the segment its server made (same key, same creator)."""
    if item.kind == "sysv":
        segment = sysv.get(item.shmid if item.shmid is not None else -1)
        return segment is not None and (segment.key, segment.creator) == (
            item.key,
            item.postmaster,
        )
    if item.kind == "packet filter":  # an iptables chain, asked by its name
        return registry.exists(item)
    return os.path.lexists(item.path)


def read_registry(
    here: liveness.Writer, sysv: dict[int, SysvSegment], directory: Path | None = None
) -> list[RegistryFile]:
    """Every howfast process's registry file on this machine (this user's), with what each
    names that is still there."""
    found = []
    base = directory or registry.registry_dir()
    try:
        paths = sorted(p for p in base.glob("*.jsonl") if p.is_file() and not p.is_symlink())
    except OSError:
        return []
    for path in paths:
        try:
            record = registry.parse_record(path.read_text(errors="replace"), str(path))
        except OSError:
            continue
        present = tuple(i for i in record.items if still_there(i, sysv))
        state = owner_state(marks.OwnerRecord(record.writer), here)
        found.append(RegistryFile(str(path), record, state, present))
    return found


def read_private_dirs(here: liveness.Writer) -> list[PrivateDir]:
    found = []
    for base in private_bases():
        for path in sorted(base.glob("howfast-*")):
            if names.private_kind(path.name) is None or path.is_symlink() or not path.is_dir():
                continue
            record = marks.read_owner(path)
            started = None
            pid = names.work_dir_pid(path.name)
            if pid is not None and liveness.pid_exists(pid):
                started = process_started(pid)
            try:
                mtime = path.stat().st_mtime
            except OSError:
                continue
            found.append(PrivateDir(str(path), record, owner_state(record, here), mtime, started))
    return found


def _entry(path: Path) -> Entry:
    kept = (path / marks.KEPT).exists() or (path / "server.log").is_file()
    size = 0
    inner: list[str] = []
    with contextlib.suppress(OSError):
        size = (path / "volume.img").stat().st_blocks * 512
    with contextlib.suppress(OSError):  # a failed volume may refuse to be read: then none
        inner = sorted(p.name for p in (path / "mnt").iterdir() if names.CLUSTER.fullmatch(p.name))
    return Entry(str(path), kept, size, tuple(inner))


def read_target_dir(
    path: Path, holders: dict[tuple[int, int, int], int] | None, *, fleet_member: bool = False
) -> TargetDir | None:
    """A directory where runs made their clusters and volumes, with the `howfast-...`
    directories in it. Only real directories (not symbolic links) are looked into."""
    try:
        if path.is_symlink() or not path.is_dir():
            return None
        children = sorted(path.iterdir())
    except OSError:
        return None
    entries, members = [], []
    for child in children:
        kind = names.target_entry_kind(child.name)
        if kind is None or child.is_symlink() or not child.is_dir():
            continue
        entries.append(_entry(child))
        if kind == "fleet":
            with contextlib.suppress(OSError):
                for member in sorted(child.iterdir()):
                    found = read_target_dir(member, holders, fleet_member=True)
                    if found is not None:
                        members.append(found)
    owned = fleet_member or (path / MARKER).exists()
    holder = lock_holder(path, holders)
    pid = None
    if holder is not None and holders is not None:
        st = path.stat()
        pid = holders.get((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino))
    return TargetDir(str(path), owned, holder, tuple(entries), tuple(members), pid)


def read_cgroups(supports: Iterable[CgroupSupport] | None = None) -> list[CgroupDir]:
    parents = {s.parent for s in (supports or (detect(), detect_io())) if s.parent is not None}
    holders = flock_holders()
    found = []
    for parent in sorted(parents):
        for path in sorted(parent.glob("howfast-*")):
            if not names.CGROUP.fullmatch(path.name) or not path.is_dir():
                continue
            lock = owner_lock_path(path.name)
            try:
                pids = tuple(int(p) for p in (path / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                continue
            held = lock.exists() and lock_holder(lock, holders) is not None
            found.append(CgroupDir(str(path), held, lock.exists(), pids))
    return found


def read_lock_files(cgroups: list[CgroupDir]) -> list[LockFile]:
    """Cgroup owner locks whose cgroup no longer exists."""
    holders = flock_holders()
    names_in_use = {Path(c.path).name for c in cgroups}
    found = []
    for base in private_bases():
        for path in sorted(base.glob("howfast-cgroup-*.lock")):
            name = names.cgroup_of_lock(path.name)
            if name is None or name in names_in_use or not path.is_file():
                continue
            found.append(LockFile(str(path), lock_holder(path, holders) is not None))
    return found


def user_names(uids: Iterable[int | None]) -> dict[int, str]:
    import pwd

    found = {}
    for uid in {u for u in uids if u is not None}:
        with contextlib.suppress(KeyError):
            found[uid] = pwd.getpwuid(uid).pw_name
    return found


def read_snapshot(
    candidates: Callable[[Snapshot, list[str]], list[str]], given: Iterable[Path] = ()
) -> Snapshot:
    """Everything cleanup looks at, read once. The target directories are those `candidates`
    finds in what was read (find.candidate_directories: those the machine points at) and the
    `given` ones; passed in, as this module is below the pure rules that choose them."""
    here = liveness.this_process()
    sysv = read_sysv()
    snapshot = Snapshot(
        processes=read_processes(),
        mounts=parse_mounts(_read(PROC / "self/mounts")),
        loops=read_loops(),
        private_dirs=read_private_dirs(here),
        euid=os.geteuid(),
        registry=read_registry(here, sysv),
        sysv=sysv,
    )
    holders = flock_holders()
    for path in candidates(snapshot, [str(Path(g).absolute()) for g in given]):
        found = read_target_dir(Path(path), holders)
        if found is not None:
            snapshot.target_dirs.append(found)
    snapshot.cgroups = read_cgroups()
    snapshot.lock_files = read_lock_files(snapshot.cgroups)
    snapshot.users = user_names(p.uid for p in snapshot.processes)
    return snapshot


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
