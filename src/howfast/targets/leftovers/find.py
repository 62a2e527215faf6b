"""What killed runs left on this machine, as rows a user reads and actions the remover runs
(pure): each group of a run's leftovers (groups.py) described part by part, in the order that
takes them down.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePath

from howfast.machine.packetfilter import HOOK
from howfast.targets.leftovers import names
from howfast.targets.leftovers.groups import (
    CLUSTER_PROGRAMS,
    GONE,
    IN_USE,
    KEPT,
    LAYER_PROGRAMS,
    SERVER_PROGRAMS,
    SETUP_PROGRAMS,
    TOOL_PROGRAMS,
    Group,
    cgroup_state,
    combine,
    data_dir_argument,
    group_all,
    in_scope,
    lock_holders,
    of_process,
    outer_directory,
    private_key,
    private_state,
    process_key,
    program,
    registry_state,
)
from howfast.targets.leftovers.machine import CgroupDir, PrivateDir, Process, Snapshot
from howfast.targets.leftovers.registry import Owned


@dataclass(frozen=True)
class Action:
    """One thing the remover does, in order; `pid` with `ticks` names a process exactly."""

    op: str  # a key of remove.ACTIONS: stop-server, stop-process, kill-servers, no-processes,
    #          umount, detach-loop, detach-loops, unmount-fuse, rmtree, rmdir-cgroup, unlink,
    #          stop-exec-groups, remove-sysv, unlink-dsm, remove-packet-filter
    path: str = ""
    pid: int | None = None
    ticks: int | None = None
    extra: str = ""  # a loop device's backing file; a segment's "ID:KEY"; a dsm file's data dir


@dataclass
class Leftover:
    kind: str  # server, tool, volume, cluster, fleet, private directory, cgroup, lock file,
    #            shared memory, packet filter
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
    found = [outer_directory(p) for p in paths]
    # the target directories themselves: an owner record's, and those of what registry
    # files name (a cluster nothing else points at: its server was down, or not yet made)
    for private in snapshot.private_dirs:
        if private.owner is not None:
            found += [outer_directory(d) or d for d in private.owner.directories]
    for record in snapshot.registry:
        found += [outer_directory(i.path) for i in record.present if i.kind == "directory"]
    return sorted({p for p in found if p is not None} | set(given))


# -- helpers ----------------------------------------------------------------------------
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


def _rmtree(path: str) -> list[Action]:
    """A directory of ours: nothing may still run or be mounted in it when it goes."""
    return [Action("no-processes", path), Action("rmtree", path)]


def segment_name(item: Owned) -> str:
    """A killed server's shared memory as the user reads it."""
    if item.kind == "sysv":
        return f"System V segment {item.shmid} (key {item.key})"
    return item.path


def segment_action(item: Owned) -> Action:
    """What removes a killed server's System V segment or /dev/shm/PostgreSQL.* file (the
    remover looks again before it acts: remove.remove_sysv, remove.unlink_dsm)."""
    if item.kind == "sysv":
        return Action("remove-sysv", item.data_dir, item.postmaster, item.ticks,
                      extra=f"{item.shmid}:{item.key}")  # fmt: skip
    return Action("unlink-dsm", item.path, item.postmaster, item.ticks, extra=item.data_dir)


# -- from groups to leftovers --------------------------------------------------------------
class Describer:
    """Each group's leftovers as rows the user reads and actions the remover runs."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def describe(self, group: Group) -> list[Leftover]:
        state, why = combine(group.marks)
        if group.kind == "cluster" and any(e.kept for e in group.entries):
            state, why = KEPT, "kept with --keep"
        found = self.servers(group, state, why) + self.tools(group, state, why)
        if group.kind == "volume":
            found += self.volume(group, state, why)
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
            if group.kind == "volume" and private_key(private)[0] == "volume":
                continue  # taken down with the volume: it holds the FUSE mount
            found.append(self.private(group, private, state, why))
        found += [self.cgroup(group, cgroup, state, why) for cgroup in group.cgroups]
        found += self.segments(group, state, why)
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
        clusters = [e.path for e in group.entries]
        on_clusters = [  # a base backup, an initdb or a pg_ctl on one of its clusters (-D)
            p
            for p in self.snapshot.processes
            if program(p) in CLUSTER_PROGRAMS
            and any(names.is_within(data_dir_argument(p) or "", c) for c in clusters)
        ]
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
            for p in self.processes_under(places, TOOL_PROGRAMS) + on_clusters
        ]

    def segments(self, group: Group, state: str, why: str) -> list[Leftover]:
        """The shared memory of its servers that were killed (a failover, a crash, or with
        howfast): a System V segment still the one its postmaster made (same id, key and
        creator), a /dev/shm/PostgreSQL.* file still there. A live server's are not listed:
        they go when it shuts down."""
        found = []
        for item in dict.fromkeys(group.segments):
            if self.server_runs(item):
                continue
            server = f"of the server PID {item.postmaster} on {item.data_dir}"
            if item.kind == "sysv":
                segment = self.snapshot.sysv.get(item.shmid or -1)
                if segment is None or (segment.key, segment.creator) != (item.key, item.postmaster):
                    continue  # removed, and the id maybe taken by another
                details = [server] + (
                    [f"{segment.attached} processes attached"] if segment.attached else []
                )
            else:
                details = [server]
            found.append(Leftover("shared memory", segment_name(item), group.name, state, why,
                                  details, None, [segment_action(item)]))  # fmt: skip
        return found

    def server_runs(self, item: Owned) -> bool:
        """Whether the server that made a segment still runs: a zombie does not (a killed
        run's postmaster may wait a while for PID 1 to collect it)."""
        return any(
            p.pid == item.postmaster
            and (item.ticks is None or p.start_ticks == item.ticks)
            and p.state not in ("Z", "X")
            for p in self.snapshot.processes
        )

    def volume(self, group: Group, state: str, why: str) -> list[Leftover]:
        """One emulated volume of a run that is gone, and whatever is on it: nothing of it is
        worth keeping, so its I/O path goes first (nbdfuse, nbdkit: whatever still waits on
        the volume then fails at once instead of waiting through the added delay), then what
        still works on it (set-up tools, the server: stopped at once), then the filesystem,
        the loop device, the FUSE file and the files. Nothing when none of it is left (its
        group holds only the shared memory of a server that ran on it, say)."""
        snap, token = self.snapshot, group.key
        workspaces = [e.path for e in group.entries]
        run_dirs = [p.path for p in group.privates if private_key(p)[0] == "volume"]
        mine = [p for p in snap.processes if process_key(p) == ("volume", token)]

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
            # by the device found here: once nbdfuse is stopped, its file's path is gone
            actions.append(Action("detach-loop", loop.device, extra=loop.backing))
        # and, looked up again when it is done, every loop device on a file of its private
        # directory: a losetup that waited on the volume may have made one since
        actions += [Action("detach-loops", d) for d in run_dirs]
        for mount in fuse:
            details.append(f"FUSE file on {mount.point}")
            actions.append(Action("unmount-fuse", mount.point))
        details += [f"image {e.size_bytes / 2**20:.0f} MiB" for e in group.entries if e.size_bytes]
        details += [f"private directory {d}" for d in run_dirs]
        actions += [Action("rmtree", d) for d in run_dirs + workspaces]
        if not actions:  # no process, mount, loop device or directory of it: nothing to list
            return []
        path = (workspaces or run_dirs or [f"howfast-vol-{token}"])[0]
        return [Leftover("volume", path, group.name, state, why, details, None, actions)]

    def private(self, group: Group, private: PrivateDir, state: str, why: str) -> Leftover:
        own_state, own_why = private_state(private, lock_holders(self.snapshot))
        if own_state == IN_USE:  # its own owner still runs: whatever the rest says
            state, why = own_state, own_why
        # an exec event's process group first (exec_groups.py): it works elsewhere
        actions = [Action("stop-exec-groups", private.path), *_rmtree(private.path)]
        return Leftover(
            "private directory", private.path, group.name, state, why, [], None, actions
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


def packet_filters(
    snapshot: Snapshot, scope: list[str] | None = None, pid: int | None = None
) -> list[Leftover]:
    """The iptables chains of `partition` events (machine/packetfilter.py) that registry
    files name and that are still there: removed once their howfast is gone. With `scope`,
    those of the howfast processes that made something in it; with `pid`, that process's."""
    found = []
    for record in snapshot.registry:
        writer = record.record.writer
        if pid is not None and (writer is None or writer.pid != pid):
            continue
        if scope is not None and not any(
            names.is_within(i.path, s)
            for i in record.record.items
            if i.kind == "directory"
            for s in scope
        ):
            continue
        state, why = registry_state(record)
        run = f"howfast PID {writer.pid}" if writer else "-"
        for item in record.present:
            if item.kind != "packet filter":
                continue
            details = [f"iptables chain, jumped to from {HOOK}: drops a partition's packets"]
            found.append(Leftover("packet filter", item.path, run, state, why, details, None,
                                  [Action("remove-packet-filter", item.path)]))  # fmt: skip
    return found


# The order the remover takes them in: the network first (a partition's packet filter), a
# volume before the server on it (its volume is taken down first), a server before its
# shared memory (a server that shuts down removes its own) and its cluster's directory,
# processes before their cgroups.
ORDER = (
    "packet filter", "tool", "volume", "server", "shared memory", "cluster", "fleet",
    "private directory", "cgroup", "lock file",
)  # fmt: skip


def find(
    snapshot: Snapshot, scope: list[str] | None = None, pid: int | None = None
) -> list[Leftover]:
    """Every leftover of howfast's runs on this machine (or of runs on `scope`'s directories,
    or of the howfast process `pid`), in the order the remover takes them: servers before
    the volumes they run on, processes before the directories and cgroups they are in."""
    groups = group_all(snapshot)
    if scope is not None:
        groups = in_scope(groups, scope)
    if pid is not None:
        groups = of_process(groups, pid)
    describer = Describer(snapshot)
    known = {d.path for d in snapshot.target_dirs}
    found = []
    for group in groups:
        for leftover in describer.describe(group):
            leftover.directories = sorted({d for d in group.directories if d in known})
            found.append(leftover)
    found += packet_filters(snapshot, scope, pid)
    if scope is None and pid is None:
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
