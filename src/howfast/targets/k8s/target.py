"""`k8s://CLASS`: PostgreSQL in a pod whose data (and WAL) live on volumes of a StorageClass
(K8sTarget); `howfast probe k8s://CLASS`: a pod on such a volume, without a server
(K8sVolumeTarget). Both are a K8sPodTarget, which owns the pod's lifecycle.

start() creates the run's objects (manifests.py) owner first, waits for the pod with watches,
and, with a server, forwards a loopback port to it for howfast's own SQL; the tools run in the
pod (hosts/pod.py, on the pod's PodDescription). With `?replicas=N` the standby pods come
next (standby.py), each waited for until it streams and has caught up. stop() deletes every
object carrying the run's label and waits until they, and the volumes bound to their claims,
are gone. Nothing else in the cluster is touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from howfast.cancel import NEVER, CancelToken
from howfast.errors import HowfastError, UsageError
from howfast.hosts.pod import ExecResult, PodDescription, PodHost
from howfast.hosts.podshell import PodShells
from howfast.machine.memory import cap_problem
from howfast.model import JSONValue, TargetRecord
from howfast.targets import pgquery
from howfast.targets.base import (
    Connection,
    PlannedClient,
    PlannedConnection,
    PlannedTarget,
    Target,
)
from howfast.targets.capabilities import (
    AppliesStepSettings,
    ClientPlacement,
    Drainable,
    HasClient,
    HasPods,
    HasServerLog,
    HasStorage,
    PodRecreatable,
    Restartable,
    ServerIdentity,
    StopsAside,
)
from howfast.targets.k8s import client_manifests as cm
from howfast.targets.k8s import facts, moves
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s import network as net
from howfast.targets.k8s import standby_manifests as sm
from howfast.targets.k8s.cluster import Cluster, PortForward, kubeconfig_namespace
from howfast.targets.k8s.names import CORDONED_BY
from howfast.targets.k8s.spec import K8sOptions, K8sSpec
from howfast.targets.k8s.standby import PodStandby, WalSender, wait_streaming

if TYPE_CHECKING:
    from howfast.hosts.base import Host
    from howfast.hosts.pod import PodExec

RESTART_TIMEOUT_S = 300
POD_GRACE_S = 30  # the server pod's terminationGracePeriodSeconds (manifests.py)


class K8sPodTarget(Target, HasStorage, HasPods, StopsAside):
    """A pod howfast creates on volumes of a StorageClass: its objects, its lifecycle, its
    host. K8sTarget runs PostgreSQL in it; K8sVolumeTarget only the storage probes."""

    kind = "k8s"
    server: ClassVar[bool]  # whether the pod runs PostgreSQL

    def __init__(
        self,
        spec: K8sSpec,
        options: K8sOptions,
        *,
        settings: dict[str, str] | None = None,
        checksums: bool = False,
        name: str | None = None,
        client: cm.Placement = "same-pod",
        client_node: str | None = None,
        node_changes_allowed: bool = False,
    ) -> None:
        self.spec = spec
        # Where pgbench runs: "pod" (a client pod of its own, issue 28) or in the server's
        # pod. "same-pod" until the runner hands client-side workloads HasClient's host.
        self.client_mode: cm.Placement = client if self.server else "same-pod"
        self.client_node = client_node
        self.options = options
        self.settings = dict(settings or {})
        self.checksums = checksums
        self.name = name or spec.text
        self.token = secrets.token_hex(4)
        # Resolved without any network access (--dry-run works without a cluster).
        self.namespace = options.namespace or kubeconfig_namespace(options.context) or "default"
        self.cluster: Cluster | None = None
        self.connection: Connection | None = None
        self.forward: PortForward | None = None
        self.pod: dict[str, Any] | None = None
        self.node: dict[str, Any] | None = None
        self.step_settings: dict[str, str] = {}
        self._host: PodHost | None = None  # the running pod's, made once it runs
        self._started = False
        self._api = RunningPod(self)
        self.mode: net.NetworkMode = net.network_mode(os.environ)
        # The primary's port: in pod mode the port-forward's here and the server's in its pod
        # (the tools there reach it at the same 127.0.0.1:PORT); in host mode free on this
        # machine. PORT until start.
        self.port: int | str = "PORT"
        self.standby_pods: list[PodStandby] = []
        self.senders: dict[str, WalSender] = {}  # what the primary said of them at start
        self.warnings: list[str] = []
        self.password: str | None = None
        self.client_pod: dict[str, Any] | None = None
        self.client_pod_node: dict[str, Any] | None = None
        self.pod_manifest: dict[str, Any] | None = None  # as created: made again by events
        # What events will do to the server's pod (issue 29): (node asked, whether it moves)
        self.recreations: list[tuple[str | None, bool]] = []
        self.drains: list[str] = []  # nodes drain events will cordon: the client avoids them
        self.cordoned_nodes: set[str] = set()  # cordoned by howfast, uncordoned by stop()
        # --yes: a drain may cordon a node, which the cluster's other users share
        self.node_changes_allowed = node_changes_allowed
        # Held while objects are created after start (an event's new pod) and while stop()
        # begins: a pod is never made once stop() has listed what to delete.
        self._objects = threading.Lock()

    # -- plan -------------------------------------------------------------------------------
    def plan(self, port: int | str | None = None, writer: str = "") -> m.Plan:
        if port is None:
            port = self.port
        return m.Plan(
            token=self.token,
            namespace=self.namespace,
            spec=self.spec,
            options=self.options,
            port=port,
            settings=self.settings,
            server=self.server,
            checksums=self.checksums,
            target_name=self.name,
            writer=writer,
            network=self.mode,
            remote_clients=self.server and (self.spec.replicas > 0 or self.client_mode == "pod"),
        )

    def standby_plans(self, host_ports: list[int | str] | None = None) -> list[sm.StandbyPlan]:
        """Each standby's plan; host mode: on `host_ports` (PORT_STANDBY_i placeholders when
        not given: a dry run)."""
        if not self.server:
            return []
        run = self.plan()
        count = self.spec.replicas
        ports = host_ports or [f"PORT_STANDBY_{i}" for i in range(1, count + 1)]
        primary = net.primary_address(run.name, self.mode, self.port)
        return [
            sm.StandbyPlan(
                run=run,
                index=i,
                mode=self.mode,
                primary=primary,
                host_port=ports[i - 1],
                standby_class=self.spec.standby_class,
            )
            for i in range(1, count + 1)
        ]

    def planned(self) -> PlannedTarget:
        """The pod as planned (node unknown), and every object start() creates, in order."""
        manifests = m.all_manifests(self.plan(), password="GENERATED-AT-RUN-TIME")
        owner = {"name": self.plan().name, "uid": "UID"}
        for standby in self.standby_plans():
            manifests += sm.objects(standby, owner)
        return PlannedTarget(
            host=PodHost(self.planned_pod(), self._api),
            connection=self._planned_connection(),
            scratch_dir=self._scratch(),
            objects=tuple(manifests),
            client=self._planned_client(owner),
        )

    def _planned_client(self, owner: Mapping[str, str]) -> PlannedClient | None:
        """The client pod, apart from the server's (--client pod), with what it dials."""
        if not self.server or self.client_mode != "pod":
            return None
        run = self.plan()
        address = self.primary_address()
        connection = PlannedConnection(
            host=address.host, port=0, user=m.SUPERUSER, dbname=cm.DATABASE, password="",
            port_text=str(address.port),
        )  # fmt: skip
        return PlannedClient(
            host=PodHost(cm.planned_client_pod(run), self._api),
            connection=connection,
            placement="pod",
            where=f"pod {cm.client_pod_name(run)}",
            node=self.client_node,
            objects=(
                cm.client_pod(run, self.mode, owner, node=self.client_node, avoid=self.drains),
            ),
        )

    def _planned_connection(self) -> Connection | None:
        if not self.server:
            return None
        return PlannedConnection(
            host="127.0.0.1", port=0, user=m.SUPERUSER, dbname="postgres", password="",
            port_text="PORT",
        )  # fmt: skip

    def _scratch(self) -> Path:
        return Path(m.SCRATCH) if self.server else Path(m.DATA_MOUNT)

    def host(self) -> Host:
        """The pod as a host: once started, the running pod on its node; before (checks, a
        dry run), the pod as planned, its node not known yet."""
        if self.pod is None:
            return PodHost(self.planned_pod(), self._api)
        return self._pod_host()

    def _pod_host(self) -> PodHost:
        if self._host is None:
            self._host = PodHost(self.pod_description(), self._api)
        return self._host

    def pod_description(self) -> PodDescription:
        """As planned until the pod runs; then the pod and node as the cluster shows them."""
        planned = self.planned_pod()
        if self.pod is None:
            return planned
        return facts.pod_description(self.pod, self.node, planned=planned)

    def pod_api(self) -> PodExec:
        return self._api

    def planned_pod(self) -> PodDescription:
        """The run's pod as its manifests make it (manifests.py), its node unknown."""
        options = self.options
        separate_fio = options.fio_image != options.image
        images = {m.TOOLS: options.image}
        if self.server:
            images[m.POSTGRES] = options.image
        if separate_fio:
            images[m.FIO] = options.fio_image
        return PodDescription(
            context=options.context,
            namespace=self.namespace,
            pod=self.plan().name,
            tools_container=m.TOOLS,
            server_container=m.POSTGRES if self.server else None,
            data_dir=m.PGDATA,
            work_dir=m.WORK_MOUNT,
            volume_root=m.MOUNT_ROOT,
            path_setup=m.PATH_SETUP,
            memory_limit_bytes=options.memory_bytes,
            program_containers={"fio": m.FIO} if separate_fio else {},
            images=images,
        )

    # -- checks -----------------------------------------------------------------------------
    def connect(self) -> Cluster:
        if self.cluster is None:
            self.cluster = Cluster(self.options.context)
        return self.cluster

    def check(self, *, will_init: bool) -> None:
        cluster = self.connect()
        cluster.server_version()  # reachable at all
        if not cluster.namespace_exists(self.namespace):
            raise UsageError(
                f"namespace {self.namespace!r} does not exist (howfast creates none)",
                "create it, or give --namespace",
            )
        for volume in (self.spec.data, self.spec.wal):
            if volume is None or volume.storage_class is None:
                continue
            if cluster.storage_class(volume.storage_class) is None:
                known = ", ".join(str(sc["metadata"]["name"]) for sc in cluster.storage_classes())
                raise UsageError(
                    f"{self.name}: no StorageClass {volume.storage_class!r}",
                    f"the cluster has: {known or 'none'}",
                )
        if self.options.memory_bytes and self.server:
            problem = cap_problem(self.options.memory_bytes, self.settings)
            if problem:
                raise UsageError(problem, "raise --memory, or lower the settings with --set")
        refusal = net.pod_security_refusal(
            self.mode, self.namespace, cluster.namespace_labels(self.namespace)
        )
        if refusal and self.server:  # a probe's pod stays off the node's network
            raise UsageError(refusal)
        if self.spec.standby_class and cluster.storage_class(self.spec.standby_class) is None:
            known = ", ".join(str(sc["metadata"]["name"]) for sc in cluster.storage_classes())
            raise UsageError(
                f"{self.name}: no StorageClass {self.spec.standby_class!r} (standby_class)",
                f"the cluster has: {known or 'none'}",
            )
        self.check_recreations(cluster)
        if self.client_mode == "pod" and self.client_node is not None:
            nodes = cluster.node_names()
            if self.client_node not in nodes:
                raise UsageError(
                    f"--client-node {self.client_node}: the cluster has no such node "
                    f"(its nodes: {', '.join(nodes)})"
                )
        self.check_design_settings()

    def check_recreations(self, cluster: Cluster) -> None:
        """What the cluster says of the events planned on the pod: nodes to move to, nodes
        to drain, a class whose volumes stay on their node."""
        moving = any(move for _, move in self.recreations)
        if not moving and not self.drains:
            return
        nodes = cluster.nodes()
        names = sorted(str(n["metadata"]["name"]) for n in nodes)
        ready = moves.schedulable(nodes)
        reasons = [
            ("a move", moves.move_refusal(node, ready, names))
            for node, move in self.recreations
            if move
        ]
        reasons += [("a drain", moves.drain_refusal(node, ready, names)) for node in self.drains]
        what = "a move" if moving else "a drain"
        for volume in (self.spec.data, self.spec.wal):
            if volume is not None and volume.storage_class is not None:
                pins = moves.class_pins(cluster.storage_class(volume.storage_class))
                reasons.append((what, pins))
        found = next(((w, r) for w, r in reasons if r is not None), None)
        if found is not None:
            raise UsageError(f"{self.name}: {found[0]} event cannot apply: {found[1]}")

    def volumes_pinned(self) -> str | None:
        if self.cluster is None or self.pod is None:
            return None
        cluster, plan = self.cluster, self.plan()
        here = str((self.pod.get("spec") or {}).get("nodeName") or "")
        volumes: dict[str, dict[str, Any]] = {}
        for claim in (c for c in (plan.data_claim, plan.wal_claim) if c):
            pvc = cluster.read("PersistentVolumeClaim", claim, self.namespace)
            name = ((pvc or {}).get("spec") or {}).get("volumeName")
            pv = cluster.read("PersistentVolume", str(name)) if name else None
            if pv is not None:
                volumes[claim] = pv
        return moves.pinned_by_volumes(volumes, cluster.nodes(), here) if volumes else None

    def cordoned(self, node: str) -> bool:
        found = self.connect().read("Node", node) or {}
        return bool((found.get("spec") or {}).get("unschedulable"))

    def uncordon(self, node: str) -> Mapping[str, JSONValue]:
        if node not in self.cordoned_nodes:
            return {"node": node, "uncordoned": False}
        self.connect().set_cordon(node, False, (CORDONED_BY, self.token))
        self.cordoned_nodes.discard(node)
        return {"node": node, "uncordoned": True}

    def check_design_settings(self) -> None:
        """Settings that would fight the standbys' design (pure: before anything exists)."""
        if not self.server or self.spec.replicas < 1:
            return
        if "synchronous_standby_names" in self.settings:
            raise UsageError(
                f"{self.name}: howfast sets synchronous_standby_names from ?replicas= and "
                "?sync=: drop --set synchronous_standby_names"
            )
        if self.spec.sync_given and "synchronous_commit" in self.settings:
            raise UsageError(
                f"{self.name}: sync={self.spec.sync} sets synchronous_commit: drop one of them"
            )

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> Connection | None:
        from howfast.store import liveness

        cluster = self.connect()
        # pod mode: the forward's port is the server's in its pod; host mode: no forward
        listener: socket.socket | None = None
        if self.server and self.mode == "pod":
            listener = PortForward.reserve()
            self.port = int(listener.getsockname()[1])
        elif self.server:
            self.port = PortForward.free_port()
        plan = self.plan(None, json.dumps(liveness.this_process().document()))
        password = secrets.token_urlsafe(24)
        try:
            self._started = True
            owner = cluster.create(m.owner_secret(plan, password))
            ref = {"name": plan.name, "uid": str(owner["metadata"]["uid"])}
            for manifest in m.dependents(plan, ref):
                if manifest["kind"] == "Pod":
                    self.pod_manifest = manifest
                self._create(cluster, manifest)
            claims = [c for c in (plan.data_claim, plan.wal_claim) if c]
            self.pod = cluster.wait_pod_ready(
                self.namespace, plan.name, claims, self.options.start_timeout_s
            )
            node_name = (self.pod.get("spec") or {}).get("nodeName")
            self.node = cluster.read("Node", str(node_name)) if node_name else None
            if self.drains or any(move for _, move in self.recreations):  # bound: before a step
                pinned = self.volumes_pinned()
                if pinned is not None:
                    what = "a move" if any(m for _, m in self.recreations) else "a drain"
                    raise UsageError(f"{self.name}: {what} event cannot apply: {pinned}")
            if self.client_mode == "pod":  # once the primary is bound: anti-affinity sees it
                cluster.create(
                    cm.client_pod(plan, self.mode, ref, node=self.client_node, avoid=self.drains)
                )
        except BaseException:
            if listener is not None:
                listener.close()
            raise
        if not self.server:
            return None
        if listener is not None:
            self.forward = PortForward(cluster, self.namespace, plan.name, listener)
            self.forward.start()
        self.connection = Connection(
            host="127.0.0.1",
            port=int(self.port),
            user=m.SUPERUSER,
            dbname="postgres",
            password=password,
        )
        self._wait_sql(30.0)
        self.password = password  # in memory only: the client's Connection carries it
        if self.spec.replicas:
            self._start_standbys(cluster, ref)
        if self.client_mode == "pod":
            self._wait_client(cluster, plan)
        return self.connection

    def _wait_client(self, cluster: Cluster, plan: m.Plan) -> None:
        """The client pod Ready, and the primary reachable from it (pg_isready, 30 s)."""
        name = cm.client_pod_name(plan)
        try:
            self.client_pod = cluster.wait_pod_ready(
                self.namespace, name, [], self.options.start_timeout_s
            )
        except HowfastError as exc:
            raise HowfastError(f"the client pod did not start: {exc}") from None
        node_name = (self.client_pod.get("spec") or {}).get("nodeName")
        self.client_pod_node = cluster.read("Node", str(node_name)) if node_name else None
        address = self.primary_address()
        probe = (
            f"{m.PATH_SETUP}; i=0; until pg_isready -q -h {address.host} -p {address.port} "
            f"-U {m.SUPERUSER} -t 2; do i=$((i+1)); [ $i -ge 15 ] && exit 1; sleep 1; done"
        )
        out = cluster.exec(self.namespace, name, m.TOOLS, ["/bin/sh", "-c", probe], timeout_s=60)
        if out.returncode != 0:
            raise HowfastError(
                f"the client pod cannot reach {address.text}: pg_isready failed for 30 s "
                "(no pod network? give --client same-pod, or HOWFAST_K8S_NETWORK=host in a "
                "test lab)"
            )

    def primary_address(self) -> net.ServerAddress:
        """Where the run's other pods (standbys, the client) dial the primary."""
        return net.primary_address(self.plan().name, self.mode, self.port)

    def _start_standbys(self, cluster: Cluster, owner: Mapping[str, str]) -> None:
        """Standby pods once the primary is Ready, one after the other (each base backup
        reads the primary's whole volume), then until every one streams and has caught up."""
        assert self.connection is not None
        ports: list[int | str] | None = None
        if self.mode == "host":
            ports = [PortForward.free_port() for _ in range(self.spec.replicas)]
        for plan in self.standby_plans(ports):
            standby = PodStandby(plan, cluster)
            self.standby_pods.append(standby)
            standby.create(owner)
            standby.wait_ready(self.options.start_timeout_s)
        self.senders = wait_streaming(self.standby_pods, self.connection, self.spec.sync)

    def _create(self, cluster: Cluster, manifest: dict[str, Any]) -> None:
        """Create one object; a NetworkPolicy this user may not create is a warning (the
        servers' password still guards their port)."""
        try:
            cluster.create(manifest)
        except HowfastError as exc:
            if manifest["kind"] != "NetworkPolicy" or "forbidden" not in str(exc):
                raise
            self.warnings.append(
                "no NetworkPolicy (forbidden): any pod of the cluster can reach the servers' "
                "port (password-protected)"
            )

    def start_warnings(self) -> tuple[str, ...]:
        return tuple(self.warnings)

    def _wait_sql(self, timeout_s: float) -> None:
        """Until the server answers through the forward (a restart may still be ending)."""
        assert self.connection is not None
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with pgquery.connect(self.connection, timeout_s=5) as db:
                    db.execute("SELECT 1")
                return
            except HowfastError as exc:
                if time.monotonic() > deadline:
                    raise HowfastError(f"{self.name}: the server does not answer: {exc}") from None
                time.sleep(0.3)

    def stops_aside(self) -> bool:
        """Beside the next target's start, unless a drain may have cordoned a node: its
        pods would be scheduled around that node until stop() uncordons it."""
        return not self.drains and not self.cordoned_nodes

    def exec_place(self) -> tuple[Cluster, str, str]:
        if self.cluster is None or self.pod is None:
            raise HowfastError(f"{self.name}: the pod is not running")
        return self.cluster, self.namespace, f"howfast-{self.token}"

    def stop(self) -> None:
        """Delete every object of this run (by its label), wait until they are gone."""
        self._api.shells.close()
        if self.forward is not None:
            self.forward.close()
            self.forward = None
        self.connection = None
        with self._objects:  # an event's pod is made before this, or not at all
            if not self._started or self.cluster is None:
                return
            self._started = False
        warnings = []
        for node in sorted(self.cordoned_nodes):  # a drain's window the schedule did not end
            try:
                self.uncordon(node)
            except HowfastError as exc:
                warnings.append(f"node {node} is still cordoned: {exc}")
        warnings += self.cluster.delete_run(self.namespace, self.token)
        self.pod = None
        self.standby_pods = []
        self.client_pod = None
        self.pod_manifest = None
        self.password = None
        if warnings:
            raise HowfastError("; ".join(warnings))

    def scratch_dir(self) -> Path | None:
        return None if self.pod is None else self._scratch()

    def storage_paths(self) -> dict[str, Path]:
        if self.pod is None:
            return {}
        wal = m.WAL_DIR if self.spec.wal else f"{m.PGDATA}/pg_wal"
        return {"data": Path(m.PGDATA), "wal": Path(wal)}

    # -- facts --------------------------------------------------------------------------------
    def record(self) -> TargetRecord:
        device: dict[str, Any] = {}
        kube: dict[str, Any] = {"namespace": self.namespace, "run_label": self.token}
        if self.cluster is not None and self.pod is not None:
            cluster = self.cluster
            with contextlib.suppress(HowfastError):
                kube["server_version"] = cluster.server_version()
            pod = cluster.read("Pod", f"howfast-{self.token}", self.namespace) or self.pod
            kube["pod"] = facts.pod_facts(pod)
            kube["node"] = facts.node_facts(self.node)
            plan = self.plan()
            for role, volume, claim_name in (
                ("data", self.spec.data, plan.data_claim),
                ("wal", self.spec.wal, plan.wal_claim),
            ):
                if volume is None:
                    continue
                entry: dict[str, Any] = {"kind": volume.describe}
                if volume.storage_class is not None and claim_name:
                    pvc = cluster.read("PersistentVolumeClaim", claim_name, self.namespace)
                    pv_name = ((pvc or {}).get("spec") or {}).get("volumeName")
                    pv = cluster.read("PersistentVolume", str(pv_name)) if pv_name else None
                    entry["storage_class"] = facts.storage_class_facts(
                        cluster.storage_class(volume.storage_class)
                    )
                    entry.update(facts.volume_facts(pvc, pv))
                else:
                    entry["medium"] = volume.medium or "disk"
                    entry["size_limit"] = self.options.volume_size
                mount = m.DATA_MOUNT if role == "data" else m.WAL_MOUNT
                with contextlib.suppress(HowfastError):
                    entry["fstype"] = self._pod_host().fstype(Path(mount))
                device[role] = entry
            if "wal" not in device and "data" in device:
                device["wal"] = dict(device["data"])
            device["wal_on_data_device"] = self.spec.wal is None
        if self.options.memory_bytes:
            device["memory_limit_bytes"] = self.options.memory_bytes
        if self.server:
            kube["network"] = net.network_label(self.mode)
        device["kubernetes"] = kube
        version: str | None = None
        settings: dict[str, str] = {}
        if self.connection is not None:
            with contextlib.suppress(HowfastError):
                version, settings = pgquery.server_facts(self.connection)
        return TargetRecord(
            name=self.name,
            kind=self.kind,
            pg_version=version,
            settings=settings,
            device=device,
            location=f"{self.spec.text} (namespace {self.namespace})",
            standbys=tuple(
                standby.record(self.senders.get(standby.name)) for standby in self.standby_pods
            ),
            client=self.client_record(),
        )

    def client_record(self) -> dict[str, JSONValue]:
        """The record's `client` (K8sTarget's, once started); {} without a server."""
        return {}


class K8sTarget(
    K8sPodTarget,
    HasServerLog,
    Restartable,
    AppliesStepSettings,
    HasClient,
    PodRecreatable,
    Drainable,
):
    """`k8s://CLASS`: PostgreSQL in the pod."""

    server = True

    # -- a node drained (issue 29: drain=NODE) -------------------------------------------
    def plan_drain(self, node: str) -> str | None:
        reason = moves.spec_pins(self.spec)
        if reason is None and not self.node_changes_allowed:
            reason = (
                f"drain cordons node {node} for the cluster's other users too (howfast did not "
                "create it): add --yes"
            )
        if reason is None and self.client_mode == "same-pod":
            reason = (
                "the load runs in the server's pod (--client same-pod), which the drain "
                "evicts: give --client pod (the default)"
            )
        if reason is None and self.client_node == node:
            reason = f"the client pod is pinned to {node} (--client-node), which the drain empties"
        if reason is None and node not in self.drains:  # each step with events asks
            self.drains.append(node)
        return reason

    def drain(self, node: str, cancel: CancelToken = NEVER) -> Mapping[str, JSONValue]:
        cluster, _, _ = self.exec_place()
        if node not in self.cordoned_nodes and not self.cordoned(node):
            with self._objects:  # stop() uncordons what it finds here
                if not self._started:
                    raise HowfastError(f"{self.name}: stopping: node {node} is not cordoned")
                cluster.set_cordon(node, True, (CORDONED_BY, self.token))
                self.cordoned_nodes.add(node)
            facts: dict[str, JSONValue] = {"node": node, "cordoned": True}
        else:
            facts = {"node": node, "cordoned": False, "note": f"{node} was cordoned already"}
        here = str(((self.pod or {}).get("spec") or {}).get("nodeName") or "")
        if here != node:
            return {**facts, "evicted": [], "server_node": here}
        try:
            destination = moves.destination(None, self.schedulable_nodes(), here)
        except ValueError as exc:
            raise HowfastError(f"drain {node}: {exc}") from None
        remade = self._remake_pod(destination, cancel, evict=True)
        return {**facts, "evicted": [str(remade["pod"])], **remade}

    # -- the server's pod made again (issue 29: delete-pod, move) ------------------------
    def plan_recreation(self, node: str | None, *, move: bool) -> str | None:
        reason = moves.spec_pins(self.spec)
        if reason is None and self.client_mode == "same-pod":
            reason = (
                "the load runs in the server's pod (--client same-pod), which the event "
                "deletes: give --client pod (the default)"
            )
        if reason is None and move and node is not None and node == self.options.node:
            reason = f"the server's pod runs on {node} already (--node {node})"
        if reason is None and (node, move) not in self.recreations:  # each step asks
            self.recreations.append((node, move))
        return reason

    def schedulable_nodes(self) -> list[str]:
        return moves.schedulable(self.connect().nodes())

    def pod_identity(self) -> ServerIdentity:
        cluster, namespace, name = self.exec_place()
        pod = cluster.read("Pod", name, namespace) or {}
        started: str | None = None
        if self.connection is not None:
            with contextlib.suppress(HowfastError):
                started = pgquery.postmaster_start_time(self.connection)
        return ServerIdentity(
            pid=None,
            started_at=started,
            node=(pod.get("spec") or {}).get("nodeName"),
            pod_uid=(pod.get("metadata") or {}).get("uid"),
        )

    def recreate_pod(
        self, node: str | None, cancel: CancelToken = NEVER
    ) -> Mapping[str, JSONValue]:
        return self._remake_pod(node, cancel, evict=False)

    def _remake_pod(
        self, node: str | None, cancel: CancelToken, *, evict: bool
    ) -> dict[str, JSONValue]:
        """Delete (or evict, as a drain does) the server's pod, and make it again."""
        cluster, namespace, name = self.exec_place()
        if self.pod_manifest is None or self.pod is None:
            raise HowfastError(f"{self.name}: the server's pod is not running")
        uid = str(self.pod["metadata"]["uid"])
        node_before = (self.pod.get("spec") or {}).get("nodeName")
        began = time.monotonic()
        # The pod's grace period: the start script's trap shuts the server down (fast)
        if evict:
            cluster.evict(name, namespace, POD_GRACE_S)
        else:
            cluster.delete("Pod", name, namespace, grace_s=POD_GRACE_S)
        if not cluster.wait_pod_gone(namespace, name, uid, POD_GRACE_S + 60, cancel):
            raise HowfastError(f"pod {name} was still there {POD_GRACE_S + 60} s after deletion")
        gone = time.monotonic()
        self._api.shells.close(name)  # their sessions ended with the pod
        with self._objects:
            if not self._started:
                raise HowfastError(f"{self.name}: stopping: the pod is not made again")
            cluster.create(moves.pod_on(self.pod_manifest, node))
        plan = self.plan()
        claims = [c for c in (plan.data_claim, plan.wal_claim) if c]
        self.pod = cluster.wait_pod_ready(
            namespace, name, claims, self.options.start_timeout_s, cancel
        )
        node_after = (self.pod.get("spec") or {}).get("nodeName")
        self.node = cluster.read("Node", str(node_after)) if node_after else None
        self._host = None  # its description names the node
        self._wait_sql(60.0)
        return {
            "pod": name,
            "pod_uid_before": uid,
            "pod_uid_after": str(self.pod["metadata"]["uid"]),
            "node_before": node_before,
            "node_after": node_after,
            "node_asked": node,
            "deleted_s": round(gone - began, 3),
            "ready_s": round(time.monotonic() - began, 3),
        }

    def client(self) -> ClientPlacement:
        """Where pgbench runs and how it reaches the primary (after start). The password
        stays in memory: the client pod has it from the Secret."""
        if self.connection is None or self.pod is None:
            raise HowfastError(f"{self.name}: the server is not running")
        address = self.primary_address()
        server_node = (self.pod.get("spec") or {}).get("nodeName")
        if self.client_mode == "same-pod":  # 127.0.0.1:PORT is the server in both places
            record = cm.client_record(
                "same-pod", self.mode, net.ServerAddress("127.0.0.1", self.port),
                node=server_node, server_node=server_node,
            )  # fmt: skip
            return ClientPlacement(self._pod_host(), self.connection, record)
        run = self.plan()
        description = facts.pod_description(
            self.client_pod, self.client_pod_node, planned=cm.planned_client_pod(run)
        )
        node = (self.client_pod or {}).get("spec", {}).get("nodeName")
        record = cm.client_record("pod", self.mode, address, node=node, server_node=server_node)
        connection = cm.client_connection(address, self.password)
        return ClientPlacement(PodHost(description, self._api), connection, record)

    def client_record(self) -> dict[str, JSONValue]:
        if self.connection is None or self.pod is None:
            return {}
        return dict(self.client().record)

    def alive(self) -> bool:
        if self.cluster is None or self.pod is None:
            return False
        pod = self.cluster.read("Pod", f"howfast-{self.token}", self.namespace)
        for status in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
            if status.get("name") == m.POSTGRES:
                return "running" in (status.get("state") or {})
        return False

    def server_log_tail(self, lines: int = 20) -> str | None:
        if self.cluster is None or self.pod is None:
            return None
        with contextlib.suppress(HowfastError):
            cluster, namespace, pod = self.exec_place()
            out = cluster.exec(namespace, pod, m.POSTGRES, ["tail", "-n", str(lines), m.SERVER_LOG])
            return out.stdout.rstrip() or None
        return None

    def restart(self) -> None:
        """pg_ctl restart in the server container: a clean checkpoint, shared_buffers empty."""
        cluster, namespace, pod = self.exec_place()
        script = (
            f"{m.PATH_SETUP}; pg_ctl -D {m.PGDATA} -l {m.SERVER_LOG} -w -t {RESTART_TIMEOUT_S} "
            "restart -m fast >/dev/null"
        )
        out = cluster.exec(
            namespace, pod, m.POSTGRES, ["/bin/sh", "-c", script], timeout_s=RESTART_TIMEOUT_S + 30
        )
        if out.returncode != 0:
            raise HowfastError(
                f"restarting PostgreSQL in pod {pod} failed: {out.stderr.strip()}\n"
                + (self.server_log_tail(10) or "")
            )
        if self.connection is not None:
            self._wait_sql(60.0)

    def apply_step_settings(self, settings: Mapping[str, str]) -> None:
        """ALTER SYSTEM, then a reload, or a restart for settings that need one."""
        if settings == self.step_settings:
            return
        if self.connection is None:
            raise HowfastError(f"{self.name}: the server is not running")
        in_force, self.step_settings = self.step_settings, {}  # the plan's, if refused
        self.step_settings = pgquery.apply_step_settings(
            self.connection, dict(settings), in_force, self.restart
        )


class K8sVolumeTarget(K8sPodTarget):
    """`howfast probe k8s://CLASS`: a pod on a volume of the class, without a server (fio and
    pg_test_fsync run in its tools container, on the volume)."""

    server = False


class RunningPod:
    """The cluster's exec for a target's pods, refused while the pod is not running (before
    start, after stop), as the target's own execs are (exec_place). Commands and the tools
    run in long-lived shells (hosts/podshell.py), which stop() closes."""

    def __init__(self, target: K8sPodTarget) -> None:
        self.target = target
        self.shells = PodShells(self._open_shell)

    def _open_shell(self, namespace: str, pod: str, container: str) -> Any:
        cluster, _, _ = self.target.exec_place()
        return cluster.exec_shell(namespace, pod, container)

    def exec(
        self, namespace: str, pod: str, container: str, command: list[str], *, timeout_s: float
    ) -> ExecResult:
        self.target.exec_place()
        return self.shells.exec(namespace, pod, container, command, timeout_s=timeout_s)

    def exec_stream(self, namespace: str, pod: str, container: str, command: list[str]) -> Any:
        self.target.exec_place()
        return self.shells.stream(namespace, pod, container, command)
