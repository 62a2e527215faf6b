"""What a target can do beyond the base (targets/base.py), one Protocol per capability.

The runner, the samplers, the workloads (and issue 29's events) ask with `isinstance`:

    if isinstance(target, Restartable):
        target.restart()
    else:
        reason = cannot_restart(target)

Every protocol is `runtime_checkable`, and a target class that has a capability subclasses it
explicitly (class LocalTarget(Target, HasStorage, Restartable, ...)): mypy then checks the
signatures, while `isinstance` on a runtime protocol checks only that the names exist. So the
base class defines none of these names: a target has a capability when it says so.

Part 1 holds what targets do today; part 2 what issues 28 (standbys, the client apart) and 29
(events during a step) will implement: declared here so that those kinds plug in by
subclassing, without touching the base. LocalTarget has HasStandbys (`--replicas`); the
others wait for their issues.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from howfast.cancel import NEVER, CancelToken

if TYPE_CHECKING:
    from howfast.hosts.base import Host
    from howfast.hosts.pod import PodDescription, PodExec
    from howfast.machine.cgroup import MemoryCgroup
    from howfast.machine.serverio import ServerIo
    from howfast.model import JSONValue
    from howfast.targets.base import Connection, Target


# -- part 1: what targets do today ---------------------------------------------------------


@runtime_checkable
class HasStorage(Protocol):
    """Storage under test that howfast can see: a directory for file-based probes (fio,
    pg_test_fsync) and the paths whose block devices the samplers watch. Not a server reached
    by a URI (its storage is out of sight)."""

    def scratch_dir(self) -> Path | None:
        """A directory on the storage under test for file-based probes; None before start
        (or when gone)."""

    def storage_paths(self) -> dict[str, Path]:
        """The paths whose block devices the samplers watch, by role ("data", "wal");
        {} before start."""


@runtime_checkable
class HasServerLog(Protocol):
    """A server howfast started and watches: whether it still runs, and its log's end (added
    to a failed step's error)."""

    def alive(self) -> bool:
        """Whether the server still runs."""

    def server_log_tail(self, lines: int = 20) -> str | None:
        """The last lines of the server log, when howfast has it."""


@runtime_checkable
class HasLocalServer(Protocol):
    """A server running on this machine, started by howfast: its log file, memory cgroup and
    own I/O are read here (the checkpoints, cgroupmem and serverio samplers, pgbench's data
    sizing, seqread)."""

    def server_log_file(self) -> Path | None:
        """The server's log file while it runs."""

    def memory_cgroup(self) -> MemoryCgroup | None:
        """The memory-limited cgroup the server runs in (`--memory`), if any."""

    def server_io(self) -> ServerIo | None:
        """Where PostgreSQL's own I/O can be read (its I/O cgroup, its processes); None
        before start."""


@runtime_checkable
class Restartable(Protocol):
    """A server howfast may stop and start again (its shared_buffers start empty)."""

    def restart(self) -> Mapping[str, JSONValue] | None:
        """Fast shutdown (a clean checkpoint), then start; back when it accepts connections
        (and its standbys stream again). HowfastError when it does not come back. The facts
        of what was done, or None: `standbys_streaming_s`, how long the standbys took to
        stream again once the server accepted connections (not a time without service)."""


@runtime_checkable
class AppliesStepSettings(Protocol):
    """A server whose settings a step may change (a plan step's `settings`)."""

    def apply_step_settings(self, settings: Mapping[str, str]) -> None:
        """Make `settings` (postgresql.conf names and values) the ones in force for the next
        step, over the plan's; an empty mapping goes back to the plan's. Reloads, or restarts
        when a setting needs it. HowfastError when refused (the plan's are then in force)."""


@runtime_checkable
class HoldsDirectoryLock(Protocol):
    """A target that locks a directory for the run (one run at a time per directory)."""

    def note_run(self, run_id: int) -> None:
        """The run holding the lock, once it exists: another howfast names it when refused."""


@runtime_checkable
class Keepable(Protocol):
    """A target that `--keep` can leave behind."""

    def kept_message(self) -> str | None:
        """After stop: what was kept and how to use it; None when nothing was kept."""


@runtime_checkable
class StopsAside(Protocol):
    """A target whose stop may run in a thread while the run's next target starts (issue
    34): what it deletes is its own alone (found by its run's labels) and stopping it is
    mostly waiting (deletions to finish). The runner waits for that stop before the next
    target's first step, so that nothing of it runs while a step measures."""

    def stops_aside(self) -> bool:
        """Whether this run's stop may go beside the next start (False, for instance, when
        stopping uncordons nodes, which the next target's pods would be scheduled around)."""


@runtime_checkable
class StartsAhead(Protocol):
    """A target whose objects may be made while the run's previous target measures (issue
    34): start_ahead() creates them without waiting (the pod is scheduled, its volumes made
    and its containers started meanwhile, its server held: nothing written on the disks);
    start() then releases the server and waits for it. stop() removes what start_ahead()
    made, whether start() ran or not."""

    def start_ahead(self) -> None:
        """Create what can be made ahead; a failure is raised by start(), not here."""


@runtime_checkable
class HasPods(Protocol):
    """A target whose tools run in a Kubernetes pod: the pod's frozen description and the
    cluster's exec, from which a PodHost is made (hosts/pod.py). Issue 28's client and standby
    pods are described the same way."""

    def pod_description(self) -> PodDescription:
        """The pod as far as known: as planned before it is scheduled (node unknown), as the
        cluster shows it once it runs."""

    def pod_api(self) -> PodExec:
        """Exec in the pod's containers (refused while the pod is not running)."""


def cannot_restart(target: Target) -> str:
    """Why a target without Restartable is not restarted (a step that wanted it warns)."""
    return f"{target.kind} targets cannot be restarted by howfast"


def keeps_own_settings(target: Target) -> str:
    """Why a target without AppliesStepSettings kept its settings for a step."""
    return f"{target.kind} targets keep their own settings"


# -- part 2: declared for issues 28 and 29 (LocalTarget has HasStandbys) -----------------


@dataclass(frozen=True)
class ServerIdentity:
    """Which server process answers now: a restart or a crash changes the pid and the start
    time, a recreated pod its uid (events are verified by comparing two of these)."""

    pid: int | None
    started_at: str | None  # pg_postmaster_start_time(), ISO 8601
    node: str | None = None  # a pod's node
    pod_uid: str | None = None


@runtime_checkable
class HasServerIdentity(Protocol):
    """(issue 29) The identity of the server now: local and k8s targets, and a dsn target
    through SQL (pg_backend_pid's postmaster, pg_postmaster_start_time)."""

    def server_identity(self) -> ServerIdentity: ...


@runtime_checkable
class Crashable(Protocol):
    """(issue 29) The server killed without a shutdown (SIGKILL of the postmaster), then
    started: crash recovery. Local targets by PID, k8s by exec in the server container."""

    def crash(self) -> Mapping[str, JSONValue]:
        """Kill, wait for the server's processes to be gone, start; back when it accepts
        connections. Returns the facts of what was done (pids, times) for the event's
        record."""


@runtime_checkable
class HasCurrentPrimary(Protocol):
    """(issues 28, 29) How to reach the primary now: it changes at a failover."""

    def connection_now(self) -> Connection:
        """howfast's own SQL connection to the current primary."""

    def client_connection_now(self, follow: bool = False) -> Connection:
        """The load's connection; `follow`: one that follows a failover (libpq multi-host,
        target_session_attrs=read-write)."""


@runtime_checkable
class StandbyMember(Protocol):
    """(issue 28) One standby of a primary: a local server (targets/replicas/local.py) or a
    pod (targets/k8s/standby.py)."""

    name: str  # "standby_1": its application_name and slot

    def build(self, primary: Connection) -> None:
        """Its data directory by base backup from the primary."""

    def start(self) -> Connection:
        """Start it; how to reach it."""

    def stop(self) -> None:
        """Stop it and remove what it created; idempotent."""

    def log_tail(self, lines: int = 20) -> str | None: ...

    def record(self) -> Mapping[str, JSONValue]:
        """What the target's record says of it (name, location, device, version, port)."""

    def host(self) -> Host:
        """The machine it runs on (a PodHost on its own pod)."""

    def storage_paths(self) -> dict[str, Path]: ...

    def server_io(self) -> ServerIo | None: ...


@runtime_checkable
class HasStandbys(Protocol):
    """(issue 28) A primary started with standbys (`--replicas N`). Issue 28 adds the design
    it was asked (`replica_spec() -> ReplicaSpec`) with targets/replicas/spec.py."""

    def standbys(self) -> Sequence[StandbyMember]:
        """The standbys, in order (standby_1 first)."""


@runtime_checkable
class HasLocalStandbys(Protocol):
    """(issue 28) A primary whose standbys keep their data on this machine, where the
    primary's devices are read: the disk sampler reads the standbys' devices too, each as a
    role of its own (samplers/session.py). Not a pod's standbys (their node's disks)."""

    def standby_storage_paths(self) -> dict[str, Path]:
        """Each standby's data directory, by its name ("standby_1"); {} before start."""


@runtime_checkable
class Promotable(Protocol):
    """(issues 28, 29) A primary with standbys that can fail over to one of them."""

    def promotable_standbys(self) -> tuple[str, ...]:
        """The standbys it has or will have at start, by name ("standby_1"...): known before
        start, for the checks before a run."""

    def failover_refusal(self) -> str | None:
        """Why this target cannot fail over as planned (known before start), or None."""

    def fail_over(
        self, standby: str, at_stop: Callable[[], None] | None = None
    ) -> Mapping[str, JSONValue]:
        """Kill the primary, promote `standby`, re-point the others; the facts of it.
        `at_stop` runs while the primary's processes are stopped, just before they are
        killed (the `failover` event cuts the node's replication link there)."""

    def restore_design(self) -> Mapping[str, JSONValue] | None:
        """Between steps: rebuild the standby lost in a failover, so the next step measures
        the design that was asked; what was done (None: no failover to undo). HowfastError
        when it cannot: the later steps are skipped with it."""


@runtime_checkable
class Partitionable(Protocol):
    """(issue 38) A primary whose standbys replicate over TCP connections of their own on
    this machine's loopback (standby_1 from 127.0.0.2): a packet filter can cut one and no
    other connection (the `partition` event)."""

    def partitionable_standbys(self) -> tuple[str, ...]:
        """The standbys it has or will have at start, by name: known before start."""

    def replication_cut(self, standby: str) -> tuple[str, int] | None:
        """(address, port) of `standby`'s replication connection now: its own loopback
        address, the current primary's port; None when there is no such standby."""

    def standby_connection(self, standby: str) -> Connection | None:
        """howfast's SQL connection to `standby` (to read its walreceiver), once started."""


@runtime_checkable
class PodRecreatable(Protocol):
    """(issue 29) A target whose server pod can be deleted and made again (same claims),
    on the same node or another: K8sTarget (delete-pod, move events)."""

    def plan_recreation(self, node: str | None, *, move: bool) -> str | None:
        """Why the server's pod cannot be deleted and made again as an event asks (`move`: on
        another node, `node` when named), as far as the target alone tells (before anything
        is created), or None; the target then checks the rest against the cluster in
        check() and, for a move, its bound volumes once its pod runs (before the first
        step)."""

    def recreate_pod(
        self, node: str | None, cancel: CancelToken = NEVER
    ) -> Mapping[str, JSONValue]:
        """Delete the server's pod (a fast shutdown), wait until it is gone, make it again
        with the same claims (on `node` when given), until the server answers SQL. Returns
        the facts (uids, nodes, times) for the event's record."""

    def pod_identity(self) -> ServerIdentity:
        """The server's pod now: its uid, its node, the server's start time."""

    def schedulable_nodes(self) -> list[str]: ...

    def volumes_pinned(self) -> str | None:
        """Why the data cannot follow the pod to another node (a local volume), or None."""


@runtime_checkable
class Drainable(Protocol):
    """(issue 29) A node of the target's cluster can be cordoned and its run's pods evicted."""

    def plan_drain(self, node: str) -> str | None:
        """Why `node` cannot be drained during a step (known before anything is created),
        or None; the target then keeps its client pod off it and checks the cluster."""

    def drain(self, node: str, cancel: CancelToken = NEVER) -> Mapping[str, JSONValue]:
        """Cordon `node` (unless it already is), evict the run's server pod from it and make
        it again on another node; the facts."""

    def cordoned(self, node: str) -> bool:
        """Whether `node` is unschedulable now."""

    def uncordon(self, node: str) -> Mapping[str, JSONValue]:
        """Make `node` schedulable again if howfast cordoned it; what was done."""


@runtime_checkable
class StorageSlowable(Protocol):
    """(issue 29) Storage whose added latency can change while the server runs (an emulated
    volume's delay file)."""

    def added_latency_ms(self) -> float: ...

    def set_added_latency(self, ms: float) -> None: ...

    def measure_flush_ms(self, n: int = 9) -> float:
        """The shortest of `n` flushes of the volume now: the load and the disk below only
        add to a flush, and the added latency is under every one."""


@runtime_checkable
class IoCappable(Protocol):
    """(issue 29) The server's I/O can be capped while it runs (its I/O cgroup)."""

    def cap_iops(self, iops: int | None) -> Mapping[str, JSONValue]:
        """Cap the server's read and write IOPS (None: lift the cap); what was set."""

    def server_iops_since(self, t: float) -> float | None:
        """The server's own IOPS since monotonic time `t` (its I/O counters)."""


@dataclass(frozen=True)
class ClientPlacement:
    """(issue 28) Where the client tools (pgbench) run and how they reach the primary."""

    host: Host
    connection: Connection
    # {"placement": "socket" | "tcp" | "pod" | "same-pod" | "this machine", "node": ...}
    record: Mapping[str, JSONValue] = field(default_factory=dict)


@runtime_checkable
class HasClient(Protocol):
    """(issue 28) A target whose client runs apart from the server (a client pod, TCP): the
    runner gives client-side workloads this host and connection instead of target.host()."""

    def client(self) -> ClientPlacement:
        """After start."""


@runtime_checkable
class OperatorManaged(Protocol):
    """(issue 37) A server an operator runs (`cnpg://`): delete-pod, failover, switchover and
    restart are requests to the operator, which decides the outage; the target watches what
    it does (its timeline) and says whether a primary serves again."""

    def operator_refusal(self, action: str, arg: str | None) -> str | None:
        """Why the operator cannot be asked `action` now (None: it can)."""

    def operator_event(
        self, action: str, arg: str | None, now: Callable[[], float]
    ) -> Mapping[str, JSONValue]:
        """Ask, then watch until a primary serves again (or a time-out): the facts, with
        `back_s` (on `now`'s clock, None if it never came back), `timeline` and `serves`."""


@dataclass(frozen=True)
class InstanceView:
    """(issue 37) One server of a design an operator runs, as a sampler reads it: its host
    (its pod, by exec: /proc, its container's cgroup) and where its data and WAL are."""

    name: str
    primary: bool
    host: Host
    paths: Mapping[str, Path]  # "data", "wal" -> a directory in its server container


@runtime_checkable
class HasInstances(Protocol):
    """(issue 37) A target whose servers are pods someone else made (`cnpg://`): every
    instance, as it runs now (a pod the operator made again is a new view)."""

    def instance_views(self) -> Sequence[InstanceView]:
        """After start; read again each time (pods come and go)."""

    def metrics_text(self, instance: str) -> str | None:
        """The instance's own metrics endpoint's text (Prometheus exposition format); None
        when its pod has none."""


def describe_capabilities(target: object) -> list[str]:
    """The capabilities a target has, by name (for messages and tests)."""
    return [c.__name__ for c in CAPABILITIES if isinstance(target, c)]


CAPABILITIES: tuple[type, ...] = (
    HasStorage,
    HasServerLog,
    HasLocalServer,
    Restartable,
    AppliesStepSettings,
    HoldsDirectoryLock,
    Keepable,
    HasPods,
    HasServerIdentity,
    Crashable,
    HasCurrentPrimary,
    HasStandbys,
    Promotable,
    Partitionable,
    PodRecreatable,
    Drainable,
    StorageSlowable,
    IoCappable,
    HasClient,
    OperatorManaged,
    HasInstances,
)
