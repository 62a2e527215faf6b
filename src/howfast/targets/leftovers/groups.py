"""Each run's leftovers in one group, and whether the howfast that made it is gone (pure).

Everything is grouped by the run that made it, through the names howfast gives (names.py):
a cluster by its token (`howfast-TOKEN` in a target directory, its `howfast-run-TOKEN-`
private directory, its `howfast-TOKEN` and `howfast-io-TOKEN` cgroups, the servers working in
it), an emulated volume by its own token (workspace, image, mounts, loop device, nbdkit and
nbdfuse, private directory, cgroup, and the cluster on it), a fleet by its workspace, a work
directory by the PID in its name.

A group is `gone` (its leftovers are removed with --yes) only when a mark says its howfast no
longer runs and none says it does:
- the registry file of the howfast that recorded it (registry.py) names a process that is
  gone (its directories, cgroups and its servers' shared memory are grouped by the cluster
  they belong to),
- the target directory's run lock is free (a live run holds it for its whole life),
- the owner record of a private directory names a process that is gone (store/liveness.py),
- a cgroup's owner lock is free,
- a server, nbdkit, nbdfuse or a volume's set-up step now belongs to PID 1 (howfast starts
  them itself: while it runs it is their parent).
A held lock, a live owner or a live howfast parent makes it `in use`; with no mark either way
it is `unknown`. Both are listed and left alone, as are clusters kept with --keep.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import PurePath

from howfast.plugin import registry
from howfast.targets.leftovers import names
from howfast.targets.leftovers.machine import (
    CgroupDir,
    Entry,
    PrivateDir,
    Process,
    RegistryFile,
    Snapshot,
    TargetDir,
)
from howfast.targets.leftovers.registry import Owned

SERVER_PROGRAMS = {"postgres", "postmaster"}
# What runs in a step's work directory: the programs the workloads declare (plugin/registry.py).
TOOL_PROGRAMS = {p.name for p in registry.programs()}
LAYER_PROGRAMS = {"nbdkit", "nbdfuse"}
# What howfast runs while it builds a volume: one of a killed run may wait for ever on its
# volume (a losetup waiting for a flush through an hour of added delay holds the kernel's
# loop device lock, and every other losetup on the machine waits behind it).
SETUP_PROGRAMS = {"losetup", "mkfs.ext4", "mke2fs", "mount", "umount", "fusermount3", "fio"}
# What howfast runs on a cluster's data directory (-D), in a session of its own: a killed
# run's base backup goes on writing into its standby's directory.
CLUSTER_PROGRAMS = {"pg_basebackup", "initdb", "pg_ctl"}

GONE, IN_USE, UNKNOWN, KEPT = "gone", "in use", "unknown", "kept"


def outer_directory(path: str) -> str | None:
    """The target directory a path of a run's belongs to: the parent of its outermost
    `howfast-...` directory (an emulated volume's cluster sits inside the volume's)."""
    parts = PurePath(path).parts
    for i in range(1, len(parts)):
        if names.target_entry_kind(parts[i]) is not None:
            return str(PurePath(*parts[:i]))
    return None


def program(process: Process) -> str:
    name = PurePath(process.exe).name if process.exe else ""
    if not name and process.argv:
        name = PurePath(process.argv[0].split()[0]).name
    return name


def combine(states: Iterable[tuple[str, str]]) -> tuple[str, str]:
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


def registry_state(found: RegistryFile) -> tuple[str, str]:
    writer = found.record.writer
    who = f"its howfast (PID {writer.pid}, in {found.path})" if writer else "its howfast"
    if found.owner_state == "gone":
        return GONE, f"{who} is gone"
    if found.owner_state == "alive":
        return IN_USE, f"{who} still runs"
    return UNKNOWN, f"{who} cannot be seen from here"


def cgroup_state(cgroup: CgroupDir) -> tuple[str, str]:
    if cgroup.lock_held:
        return IN_USE, "its owner lock is held"
    if not cgroup.lock_exists:
        return UNKNOWN, "no owner lock (not made by this howfast)"
    return GONE, "its owner lock is free: its howfast is gone"


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
    records: list[RegistryFile] = field(default_factory=list)  # the registry files naming it
    segments: list[Owned] = field(default_factory=list)  # its servers' shared memory

    def writers(self) -> set[tuple[int, int | None]]:
        found = set()
        for private in self.privates:
            if private.owner and private.owner.writer:
                found.add((private.owner.writer.pid, private.owner.writer.start_ticks))
        for record in self.records:
            if record.record.writer:
                found.add((record.record.writer.pid, record.record.writer.start_ticks))
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


def private_key(private: PrivateDir) -> tuple[str, str]:
    name = PurePath(private.path).name
    token, kind = names.private_token(name), names.private_kind(name)
    if token and kind == "volume":
        return "volume", token
    if token and kind == "run":
        return "cluster", token
    return "private", private.path


def path_key(path: str) -> tuple[str, str] | None:
    """The group of a directory a registry file names: a cluster (or a standby's root in
    one) by its token, a volume by its token, a fleet by its workspace, a private directory."""
    name = PurePath(path).name
    kind = names.target_entry_kind(name)
    if kind == "fleet":
        return "fleet", path
    if kind is not None:
        return kind, name.rsplit("-", 1)[1]
    if names.private_kind(name) is not None:
        return private_key(PrivateDir(path, None, "unknown", 0.0))
    cluster = names.cluster_of(path)
    return ("cluster", cluster[1]) if cluster else None


def data_dir_key(data_dir: str) -> tuple[str, str] | None:
    """The group of what a server on `data_dir` left: the cluster it is in, else the emulated
    volume it is on (a standby's own volume: `<dir>/howfast-vol-TOKEN/mnt/standby_1/data`)."""
    cluster = names.cluster_of(data_dir)
    if cluster:
        return "cluster", cluster[1]
    volume = names.volume_of(data_dir)
    return ("volume", volume[1]) if volume else None


def lock_holders(snapshot: Snapshot) -> dict[int, str]:
    """The PIDs holding target directories' run locks: live runs, in words."""
    found = {}
    for directory in snapshot.target_dirs:
        for held in (directory, *directory.members):
            if held.holder_pid is not None and held.holder:
                found[held.holder_pid] = held.holder.split(" since ")[0]
    return found


def process_key(process: Process) -> tuple[str, str] | None:
    """The group a process howfast started belongs to: a server by the cluster it works in,
    nbdkit, nbdfuse and a volume's set-up tools by the volume they name."""
    name = program(process)
    if name in SERVER_PROGRAMS and process.cwd:
        cluster = names.cluster_of(process.cwd)
        return ("cluster", cluster[1]) if cluster else None
    if name in CLUSTER_PROGRAMS:
        cluster = names.cluster_of(data_dir_argument(process) or "")
        return ("cluster", cluster[1]) if cluster else None
    if name in LAYER_PROGRAMS | SETUP_PROGRAMS:
        for arg in process.argv[1:]:
            found = names.volume_run_dir_of(arg) or names.volume_of(arg.removeprefix("file="))
            if found:
                return "volume", found[1]
    return None


def data_dir_argument(process: Process) -> str | None:
    """The data directory a PostgreSQL program works on: `-D DIR`, `-DDIR`, `--pgdata=DIR`."""
    argv = process.argv
    for i, arg in enumerate(argv[1:], 1):
        if arg in ("-D", "--pgdata") and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--pgdata="):
            return arg.removeprefix("--pgdata=")
        if arg.startswith("-D") and len(arg) > 2:
            return arg[2:]
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
    grouping = _Grouping(snapshot)
    grouping.add_target_dirs()
    grouping.add_private_dirs()
    grouping.place_servers_on_volumes()
    grouping.add_registry_files()
    grouping.add_parent_marks()
    grouping.fold_inner_clusters()
    grouping.add_cgroups()
    return [grouping.groups[k] for k in sorted(grouping.groups)]


class _Grouping:
    """group_all's groups as they are built, in the order its steps run (a later step finds
    the groups and the nesting the earlier ones made)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.groups: dict[tuple[str, str], Group] = {}
        self.inner: dict[str, tuple[str, str]] = {}  # a cluster's token -> its volume or fleet
        self.cgroup_dirs: dict[str, str] = {}  # a cgroup a registry file names -> its data

    def group(self, key: tuple[str, str]) -> Group:
        return self.groups.setdefault(key, Group(*key))

    def add_target_dirs(self) -> None:
        for directory in self.snapshot.target_dirs:
            state = directory_state(directory)
            for entry in directory.entries:
                found = self.group(_entry_key(entry))
                found.marks.append(state)
                found.directories.append(directory.path)
                found.entries.append(entry)
                for name in entry.inner:  # the clusters on a volume
                    self.inner[name.removeprefix("howfast-")] = ("volume", found.key)
                if found.kind == "fleet":
                    for member in directory.members:
                        if names.is_within(member.path, entry.path):
                            for cluster in member.entries:
                                self.inner[_entry_key(cluster)[1]] = ("fleet", found.key)

    def add_private_dirs(self) -> None:
        holders = lock_holders(self.snapshot)
        for private in self.snapshot.private_dirs:
            found = self.group(private_key(private))
            found.privates.append(private)
            found.marks.append(private_state(private, holders))
            for used in private.owner.directories if private.owner else ():
                found.directories.append(outer_directory(used) or used)
                volume = names.volume_of(used)
                if found.kind == "cluster" and volume:
                    self.inner[found.key] = ("volume", volume[1])

    def place_servers_on_volumes(self) -> None:
        """A server on a volume names both in its directory."""
        for process in self.snapshot.processes:  # a server on a volume names both in its directory
            if process.cwd and program(process) in SERVER_PROGRAMS:
                on_volume, in_cluster = names.volume_of(process.cwd), names.cluster_of(process.cwd)
                if on_volume and in_cluster and names.is_within(in_cluster[0], on_volume[0]):
                    self.inner[in_cluster[1]] = ("volume", on_volume[1])

    def add_registry_files(self) -> None:
        for record in self.snapshot.registry:
            record_mark = registry_state(record)
            for item in record.present:
                if item.kind == "cgroup":
                    self.cgroup_dirs[item.path] = item.data_dir
                    continue
                named = (
                    path_key(item.path) if item.kind == "directory" else data_dir_key(item.data_dir)
                )
                if named is None:
                    continue
                owner = self.group(named)
                owner.marks.append(record_mark)
                if record not in owner.records:
                    owner.records.append(record)
                if item.kind in ("sysv", "dsm"):
                    owner.segments.append(item)

    def add_parent_marks(self) -> None:
        """Whose child a process is says whether its howfast runs."""
        by_pid = {p.pid: p for p in self.snapshot.processes}
        for process in self.snapshot.processes:  # whose child it is says whether its howfast runs
            key = process_key(process)
            mark = parent_state(process, by_pid) if key else None
            if key and mark:
                self.group(
                    self.inner.get(key[1], key) if key[0] == "cluster" else key
                ).marks.append(mark)

    def fold_inner_clusters(self) -> None:
        """A cluster goes with its volume or fleet."""
        for token, outer_key in self.inner.items():  # a cluster goes with its volume or fleet
            outer = self.group(outer_key)
            outer.tokens.add(token)
            taken = self.groups.pop(("cluster", token), None)
            if taken is not None:
                outer.marks += taken.marks
                outer.privates += taken.privates
                outer.directories += taken.directories
                outer.records += [r for r in taken.records if r not in outer.records]
                outer.segments += taken.segments

    def add_cgroups(self) -> None:
        for cgroup in self.snapshot.cgroups:
            name = PurePath(cgroup.path).name
            match = names.CGROUP.fullmatch(name)
            token = match[2] if match else ""
            where: tuple[str, str] = (
                ("volume", token) if match and match[1] == "vol" else ("cluster", token)
            )
            if (
                where not in self.groups and cgroup.path in self.cgroup_dirs
            ):  # a standby's, by its server
                where = data_dir_key(self.cgroup_dirs[cgroup.path]) or where
            if where[0] == "cluster" and where[1] in self.inner:
                where = self.inner[where[1]]
            if where not in self.groups:
                where = ("cgroup", cgroup.path)
            found = self.group(where)
            found.cgroups.append(cgroup)
            found.marks.append(cgroup_state(cgroup))
            for record in self.snapshot.registry:
                if any(i.kind == "cgroup" and i.path == cgroup.path for i in record.present):
                    found.marks.append(registry_state(record))
                    if record not in found.records:
                        found.records.append(record)


def of_process(groups: list[Group], pid: int) -> list[Group]:
    """The groups a howfast process `pid` left: those its registry file or an owner record
    names it in, and its work directory (named by its PID)."""
    return [
        g
        for g in groups
        if any(found == pid for found, _ in g.writers())
        or (g.kind == "private" and names.work_dir_pid(PurePath(g.key).name) == pid)
    ]


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
