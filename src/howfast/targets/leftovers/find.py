"""Which of what howfast made on this machine was left by a run whose howfast is gone (pure).

Everything is grouped by the run that made it, through the names howfast gives (names.py):
a cluster by its token (`howfast-TOKEN` in a target directory, its `howfast-run-TOKEN-`
private directory, its `howfast-TOKEN` and `howfast-io-TOKEN` cgroups, the servers working in
it), an emulated volume by its own token (workspace, image, mounts, loop device, nbdkit and
nbdfuse, private directory, cgroup, and the cluster on it), a fleet by its workspace, a work
directory by the PID in its name.

A group is `gone` (its leftovers are removed with --yes) only when a mark says its howfast no
longer runs and none says it does:
- the target directory's run lock is free (a live run holds it for its whole life),
- the owner record of a private directory names a process that is gone (store/liveness.py),
- a cgroup's owner lock is free.
A held lock or a live owner makes it `in use`; with no mark either way it is `unknown`. Both
are listed and left alone, as are clusters kept with --keep.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import PurePath

from howfast.targets.leftovers import names
from howfast.targets.leftovers.machine import (
    CgroupDir,
    Entry,
    PrivateDir,
    Process,
    Snapshot,
    TargetDir,
)

SERVER_PROGRAMS = {"postgres", "postmaster"}
TOOL_PROGRAMS = {"pgbench", "fio", "pg_test_fsync"}  # what runs in a step's work directory
LAYER_PROGRAMS = {"nbdkit", "nbdfuse"}
# What howfast runs while it builds a volume: one of a killed run may wait for ever on its
# volume (a losetup waiting for a flush through an hour of added delay holds the kernel's
# loop device lock, and every other losetup on the machine waits behind it).
SETUP_PROGRAMS = {"losetup", "mkfs.ext4", "mke2fs", "mount", "umount", "fusermount3", "fio"}

GONE, IN_USE, UNKNOWN, KEPT = "gone", "in use", "unknown", "kept"


@dataclass(frozen=True)
class Action:
    """One thing the remover does, in order; `pid` with `ticks` names a process exactly."""

    op: str  # stop-server, stop-process, no-processes, umount, detach-loop, unmount-fuse,
    #          rmtree, unlink, rmdir-cgroup
    path: str = ""
    pid: int | None = None
    ticks: int | None = None
    extra: str = ""  # a loop device's backing file; a cgroup's owner lock


@dataclass
class Leftover:
    kind: str  # server, tool, volume, cluster, fleet, private directory, cgroup, lock file
    path: str
    run: str  # what ties it to its run: a name, a PID
    state: str  # gone, in use, unknown, kept
    reason: str
    details: list[str] = field(default_factory=list)
    stop_command: str | None = None
    actions: list[Action] = field(default_factory=list)
    directories: list[str] = field(default_factory=list)  # whose run locks removal holds
    removed: bool = False
    error: str | None = None

    @property
    def removable(self) -> bool:
        return self.state == GONE and bool(self.actions)


# -- which target directories to look into ----------------------------------------------
def outer_directory(path: str) -> str | None:
    """The target directory a path of a run's belongs to: the parent of its outermost
    `howfast-...` directory (an emulated volume's cluster sits inside the volume's)."""
    parts = PurePath(path).parts
    for i in range(1, len(parts)):
        if names.target_entry_kind(parts[i]) is not None:
            return str(PurePath(*parts[:i]))
    return None


def candidate_directories(snapshot: Snapshot, given: Iterable[str] = ()) -> list[str]:
    """Target directories where runs left something, as this machine shows them: servers'
    working directories, mount points, nbdkit's image, the private directories' records."""
    paths: list[str] = list(given)
    for process in snapshot.processes:
        if process.cwd:
            paths.append(process.cwd)
        if program(process) in LAYER_PROGRAMS:
            paths += [a.removeprefix("file=") for a in process.argv if a.startswith("file=")]
    paths += [m.point for m in snapshot.mounts]
    for private in snapshot.private_dirs:
        if private.owner is not None:
            paths += private.owner.directories
    found = [outer_directory(p) for p in paths]
    return sorted({p for p in found if p is not None} | set(given))


# -- helpers ----------------------------------------------------------------------------
def program(process: Process) -> str:
    name = PurePath(process.exe).name if process.exe else ""
    if not name and process.argv:
        name = PurePath(process.argv[0].split()[0]).name
    return name


def server_roots(processes: list[Process]) -> list[Process]:
    """The postmasters among a cluster's processes: those whose parent is not one of them."""
    pids = {p.pid for p in processes}
    return [p for p in processes if p.ppid not in pids]


def stop_command(root: Process, data_dir: str, users: dict[int, str], euid: int) -> str:
    """What a user would type to stop the server: pg_ctl beside its postgres, as its user."""
    bindir = PurePath(root.exe).parent if root.exe else None
    pg_ctl = str(bindir / "pg_ctl") if bindir else "pg_ctl"
    command = f"{pg_ctl} -D {data_dir} stop -m fast"
    if root.uid is not None and root.uid != euid:
        command = f"sudo -u {users.get(root.uid, str(root.uid))} {command}"
    return command


def _combine(states: Iterable[tuple[str, str]]) -> tuple[str, str]:
    """One state for a run's group from each mark's (state, why): a sign of life wins."""
    marks = list(states)
    for wanted in (IN_USE, GONE, UNKNOWN):
        for state, why in marks:
            if state == wanted:
                return state, why
    return UNKNOWN, "no mark says whether its howfast runs"


def directory_state(directory: TargetDir) -> tuple[str, str]:
    for held in (directory, *directory.members):
        if held.holder:
            return IN_USE, f"in use by {held.holder.split(' since ')[0]}"
    if not directory.owned:
        return UNKNOWN, f"{directory.path} carries no howfast marker"
    return GONE, "its directory's run lock is free"


def private_state(private: PrivateDir, holders: dict[int, str] | None = None) -> tuple[str, str]:
    writer = private.owner.writer if private.owner else None
    who = f"its howfast (PID {writer.pid})" if writer else "its howfast"
    if private.owner_state == "gone":
        return GONE, f"{who} is gone"
    if private.owner_state == "alive":
        return IN_USE, f"{who} still runs"
    pid = names.work_dir_pid(PurePath(private.path).name)
    if pid is not None and private.owner is None:  # made before owner records
        if holders and pid in holders:
            return IN_USE, f"in use by {holders[pid]}"
        if private.owner_started is None:
            return GONE, f"its howfast (PID {pid}) is gone"
        if private.owner_started > private.mtime:
            return GONE, f"its howfast (PID {pid}) is gone (a newer process has that PID)"
        return UNKNOWN, f"PID {pid} runs: it may be its howfast"
    return UNKNOWN, "no owner record (made by an older howfast?)"


def cgroup_state(cgroup: CgroupDir) -> tuple[str, str]:
    if cgroup.lock_held:
        return IN_USE, "its owner lock is held"
    if not cgroup.lock_exists:
        return UNKNOWN, "no owner lock (not made by this howfast)"
    return GONE, "its owner lock is free: its howfast is gone"


def _rmtree(path: str) -> list[Action]:
    """A directory of ours: nothing may still run or be mounted in it when it goes."""
    return [Action("no-processes", path), Action("rmtree", path)]


# -- the groups -------------------------------------------------------------------------
@dataclass
class Group:
    """Everything of one run's cluster, volume, fleet, or one private directory or cgroup
    that nothing else claims."""

    kind: str  # cluster, volume, fleet, private, cgroup
    key: str  # a token; a fleet's workspace; the private directory or cgroup itself
    marks: list[tuple[str, str]] = field(default_factory=list)
    directories: list[str] = field(default_factory=list)  # the target directories it is in
    entries: list[Entry] = field(default_factory=list)
    privates: list[PrivateDir] = field(default_factory=list)
    cgroups: list[CgroupDir] = field(default_factory=list)
    tokens: set[str] = field(default_factory=set)  # the clusters on a volume, in a fleet

    def writers(self) -> set[tuple[int, int | None]]:
        found = set()
        for private in self.privates:
            if private.owner and private.owner.writer:
                found.add((private.owner.writer.pid, private.owner.writer.start_ticks))
        return found

    @property
    def name(self) -> str:
        """What ties its leftovers together, as the table shows it."""
        if self.kind in ("cluster", "volume"):
            return f"howfast-{'vol-' if self.kind == 'volume' else ''}{self.key}"
        if self.kind == "fleet":
            return PurePath(self.key).name
        pid = names.work_dir_pid(PurePath(self.key).name)
        writers = self.writers()
        if pid is None and writers:
            pid = min(writers)[0]
        return f"PID {pid}" if pid is not None else "-"


def _entry_key(entry: Entry) -> tuple[str, str]:
    name = PurePath(entry.path).name
    kind = names.target_entry_kind(name) or "cluster"
    return kind, entry.path if kind == "fleet" else name.rsplit("-", 1)[1]


def _private_key(private: PrivateDir) -> tuple[str, str]:
    name = PurePath(private.path).name
    token, kind = names.private_token(name), names.private_kind(name)
    if token and kind == "volume":
        return "volume", token
    if token and kind == "run":
        return "cluster", token
    return "private", private.path


def lock_holders(snapshot: Snapshot) -> dict[int, str]:
    """The PIDs holding target directories' run locks: live runs, in words."""
    found = {}
    for directory in snapshot.target_dirs:
        for held in (directory, *directory.members):
            if held.holder_pid is not None and held.holder:
                found[held.holder_pid] = held.holder.split(" since ")[0]
    return found


def _process_key(process: Process) -> tuple[str, str] | None:
    """The group a process howfast started belongs to: a server by the cluster it works in,
    nbdkit, nbdfuse and a volume's set-up tools by the volume they name."""
    name = program(process)
    if name in SERVER_PROGRAMS and process.cwd:
        cluster = names.cluster_of(process.cwd)
        return ("cluster", cluster[1]) if cluster else None
    if name in LAYER_PROGRAMS | SETUP_PROGRAMS:
        for arg in process.argv[1:]:
            found = names.volume_run_dir_of(arg) or names.volume_of(arg.removeprefix("file="))
            if found:
                return "volume", found[1]
    return None


def is_howfast(process: Process) -> bool:
    """`howfast ...` or `python -m howfast ...`."""
    argv = process.argv
    if any(PurePath(a).name == "howfast" for a in argv[:2]):
        return True
    return any(a == "-m" and b == "howfast" for a, b in pairwise(argv))


def parent_state(process: Process, by_pid: dict[int, Process]) -> tuple[str, str] | None:
    """howfast starts its servers, nbdkit and nbdfuse itself: while it lives it is their
    parent; once it is gone they belong to PID 1. Another parent (a subreaper) tells nothing."""
    parent = by_pid.get(process.ppid)
    if parent is None or program(parent) == program(process):  # a backend: its postmaster's
        return None
    if is_howfast(parent):
        return IN_USE, f"its howfast (PID {parent.pid}) still runs"
    if parent.pid == 1:
        return (
            GONE,
            f"its howfast is gone: PID 1 adopted its {program(process)} (PID {process.pid})",
        )
    return None


def group_all(snapshot: Snapshot) -> list[Group]:
    """Each run's things in one group, with the marks that tell whether its howfast runs."""
    groups: dict[tuple[str, str], Group] = {}

    def group(key: tuple[str, str]) -> Group:
        return groups.setdefault(key, Group(*key))

    inner: dict[str, tuple[str, str]] = {}  # a cluster's token -> the volume or fleet it is in
    for directory in snapshot.target_dirs:
        state = directory_state(directory)
        for entry in directory.entries:
            found = group(_entry_key(entry))
            found.marks.append(state)
            found.directories.append(directory.path)
            found.entries.append(entry)
            for name in entry.inner:  # the clusters on a volume
                inner[name.removeprefix("howfast-")] = ("volume", found.key)
            if found.kind == "fleet":
                for member in directory.members:
                    if names.is_within(member.path, entry.path):
                        for cluster in member.entries:
                            inner[_entry_key(cluster)[1]] = ("fleet", found.key)
    holders = lock_holders(snapshot)
    for private in snapshot.private_dirs:
        found = group(_private_key(private))
        found.privates.append(private)
        found.marks.append(private_state(private, holders))
        for used in private.owner.directories if private.owner else ():
            found.directories.append(outer_directory(used) or used)
            volume = names.volume_of(used)
            if found.kind == "cluster" and volume:
                inner[found.key] = ("volume", volume[1])
    for process in snapshot.processes:  # a server on a volume names both in its directory
        if process.cwd and program(process) in SERVER_PROGRAMS:
            on_volume, in_cluster = names.volume_of(process.cwd), names.cluster_of(process.cwd)
            if on_volume and in_cluster and names.is_within(in_cluster[0], on_volume[0]):
                inner[in_cluster[1]] = ("volume", on_volume[1])
    by_pid = {p.pid: p for p in snapshot.processes}
    for process in snapshot.processes:  # whose child it is says whether its howfast runs
        key = _process_key(process)
        mark = parent_state(process, by_pid) if key else None
        if key and mark:
            group(inner.get(key[1], key) if key[0] == "cluster" else key).marks.append(mark)
    for token, outer_key in inner.items():  # a cluster goes with its volume or fleet
        outer = group(outer_key)
        outer.tokens.add(token)
        taken = groups.pop(("cluster", token), None)
        if taken is not None:
            outer.marks += taken.marks
            outer.privates += taken.privates
            outer.directories += taken.directories
    for cgroup in snapshot.cgroups:
        name = PurePath(cgroup.path).name
        match = names.CGROUP.fullmatch(name)
        token = match[2] if match else ""
        key = ("volume", token) if match and match[1] == "vol" else ("cluster", token)
        if key[0] == "cluster" and token in inner:
            key = inner[token]
        if key not in groups:
            key = ("cgroup", cgroup.path)
        found = group(key)
        found.cgroups.append(cgroup)
        found.marks.append(cgroup_state(cgroup))
    return [groups[k] for k in sorted(groups)]


def in_scope(groups: list[Group], scope: list[str]) -> list[Group]:
    """The groups of runs on the given directories, and what the same howfast process left
    elsewhere (its work directory, named by its owner record or its PID)."""
    chosen = [g for g in groups if any(names.is_within(d, s) for d in g.directories for s in scope)]
    writers = set().union(*(g.writers() for g in chosen)) if chosen else set()
    pids = {pid for pid, _ in writers}
    for group in groups:
        if group in chosen:
            continue
        work_pid = names.work_dir_pid(PurePath(group.key).name)
        if group.writers() & writers or (work_pid in pids and not group.writers()):
            chosen.append(group)
    return [g for g in groups if g in chosen]


# -- from groups to leftovers --------------------------------------------------------------
class Describer:
    """Each group's leftovers as rows the user reads and actions the remover runs."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def describe(self, group: Group) -> list[Leftover]:
        state, why = _combine(group.marks)
        if group.kind == "cluster" and any(e.kept for e in group.entries):
            state, why = KEPT, "kept with --keep"
        found = self.servers(group, state, why) + self.tools(group, state, why)
        if group.kind == "volume":
            found.append(self.volume(group, state, why))
        elif group.kind in ("cluster", "fleet"):
            details = [f"{len(group.tokens)} instance cluster(s)"] if group.kind == "fleet" else []
            for entry in group.entries:
                found.append(
                    Leftover(
                        group.kind,
                        entry.path,
                        group.name,
                        state,
                        why,
                        details,
                        None,
                        _rmtree(entry.path),
                    )
                )
        for private in group.privates:
            if group.kind == "volume" and _private_key(private)[0] == "volume":
                continue  # taken down with the volume: it holds the FUSE mount
            found.append(self.private(group, private, state, why))
        found += [self.cgroup(group, cgroup, state, why) for cgroup in group.cgroups]
        return found

    def processes_under(self, directories: list[str], programs: set[str]) -> list[Process]:
        return [
            p
            for p in self.snapshot.processes
            if p.cwd
            and program(p) in programs
            and any(names.is_within(p.cwd, d) for d in directories)
        ]

    def servers(self, group: Group, state: str, why: str) -> list[Leftover]:
        by_dir: dict[str, list[Process]] = defaultdict(list)
        for process in self.processes_under([e.path for e in group.entries], SERVER_PROGRAMS):
            by_dir[process.cwd or ""].append(process)
        found = []
        for data_dir, members in sorted(by_dir.items()):
            pids = ", ".join(str(p.pid) for p in sorted(members, key=lambda p: p.pid))
            for root in server_roots(members):
                command: str | None = None  # a live run's server is never to be stopped
                if state == GONE:
                    command = stop_command(root, data_dir, self.snapshot.users, self.snapshot.euid)
                found.append(
                    Leftover(
                        "server",
                        data_dir,
                        group.name,
                        state,
                        why,
                        [f"PIDs {pids}"],
                        command,
                        [Action("stop-server", data_dir, root.pid, root.start_ticks)],
                    )
                )
        return found

    def tools(self, group: Group, state: str, why: str) -> list[Leftover]:
        """pgbench, fio... that a killed run started; they end by themselves, at the end of
        their step's duration, but a long step may have far to go."""
        places = [p.path for p in group.privates]
        return [
            Leftover(
                "tool",
                f"{program(p)} PID {p.pid}",
                group.name,
                state,
                why,
                [f"started by {group.name}: {' '.join(p.argv)[:80]}"],
                None,
                [Action("stop-process", p.cwd or "", p.pid, p.start_ticks)],
            )
            for p in self.processes_under(places, TOOL_PROGRAMS)
        ]

    def volume(self, group: Group, state: str, why: str) -> Leftover:
        """One emulated volume of a run that is gone, and whatever is on it: nothing of it is
        worth keeping, so its I/O path goes first (nbdfuse, nbdkit: whatever still waits on
        the volume then fails at once instead of waiting through the added delay), then what
        still works on it (set-up tools, the server: stopped at once), then the filesystem,
        the loop device, the FUSE file and the files."""
        snap, token = self.snapshot, group.key
        workspaces = [e.path for e in group.entries]
        run_dirs = [p.path for p in group.privates if _private_key(p)[0] == "volume"]
        mine = [p for p in snap.processes if _process_key(p) == ("volume", token)]

        def ours(path: str) -> bool:
            found = names.volume_run_dir_of(path) or names.volume_of(path)
            return found is not None and found[1] == token

        details: list[str] = []
        actions: list[Action] = []
        layers = sorted(  # the client first: its FUSE connection goes down with it
            (p for p in mine if program(p) in LAYER_PROGRAMS), key=lambda p: program(p) != "nbdfuse"
        )
        for process in layers + [p for p in mine if program(p) in SETUP_PROGRAMS]:
            details.append(f"{program(process)} PID {process.pid}")
            actions.append(Action("stop-process", "", process.pid, process.start_ticks))
        for workspace in workspaces:
            actions += [Action("kill-servers", workspace), Action("no-processes", workspace)]
        mounts = sorted((m for m in snap.mounts if ours(m.point)), key=lambda m: -len(m.point))
        fuse = [m for m in mounts if m.fstype.startswith("fuse")]
        for mount in (m for m in mounts if m not in fuse):
            details.append(f"{mount.fstype} mounted on {mount.point}")
            actions.append(Action("umount", mount.point))
        for loop in (x for x in snap.loops if ours(x.backing)):
            details.append(f"loop device {loop.device}")
            actions.append(Action("detach-loop", loop.device, extra=loop.backing))
        for mount in fuse:
            details.append(f"FUSE file on {mount.point}")
            actions.append(Action("unmount-fuse", mount.point))
        details += [f"image {e.size_bytes / 2**20:.0f} MiB" for e in group.entries if e.size_bytes]
        details += [f"private directory {d}" for d in run_dirs]
        actions += [Action("rmtree", d) for d in run_dirs + workspaces]
        path = (workspaces or run_dirs or [f"howfast-vol-{token}"])[0]
        return Leftover("volume", path, group.name, state, why, details, None, actions)

    def private(self, group: Group, private: PrivateDir, state: str, why: str) -> Leftover:
        own_state, own_why = private_state(private, lock_holders(self.snapshot))
        if own_state == IN_USE:  # its own owner still runs: whatever the rest says
            state, why = own_state, own_why
        return Leftover(
            "private directory", private.path, group.name, state, why, [], None,
            _rmtree(private.path),
        )  # fmt: skip

    def cgroup(self, group: Group, cgroup: CgroupDir, state: str, why: str) -> Leftover:
        own_state, own_why = cgroup_state(cgroup)
        if own_state != GONE:  # a held owner lock, or none: never removed
            state, why = own_state, own_why
        details = [f"processes {', '.join(map(str, cgroup.pids))}"] if cgroup.pids else []
        return Leftover(
            "cgroup", cgroup.path, group.name, state, why, details, None,
            [Action("rmdir-cgroup", cgroup.path)],
        )  # fmt: skip


# The order the remover takes them in: a volume before the server on it (its volume is taken
# down first), a server before its cluster's directory, processes before their cgroups.
ORDER = ("tool", "volume", "server", "cluster", "fleet", "private directory", "cgroup", "lock file")


def find(snapshot: Snapshot, scope: list[str] | None = None) -> list[Leftover]:
    """Every leftover of howfast's runs on this machine (or of runs on `scope`'s directories),
    in the order the remover takes them: servers before the volumes they run on, processes
    before the directories and cgroups they are in."""
    groups = group_all(snapshot)
    if scope is not None:
        groups = in_scope(groups, scope)
    describer = Describer(snapshot)
    known = {d.path for d in snapshot.target_dirs}
    found = []
    for group in groups:
        for leftover in describer.describe(group):
            leftover.directories = sorted({d for d in group.directories if d in known})
            found.append(leftover)
    if scope is None:
        found += [
            Leftover(
                "lock file",
                lock.path,
                "-",
                GONE,
                "a cgroup owner lock whose cgroup is gone, and nothing holds it",
                [],
                None,
                [Action("unlink", lock.path)],
            )
            for lock in snapshot.lock_files
            if not lock.held
        ]
    return sorted(found, key=lambda x: ORDER.index(x.kind))
