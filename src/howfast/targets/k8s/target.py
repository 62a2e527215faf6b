"""`k8s://CLASS`: PostgreSQL in a pod whose data (and WAL) live on volumes of a StorageClass
(K8sTarget); `howfast probe k8s://CLASS`: a pod on such a volume, without a server
(K8sVolumeTarget). Both are a K8sPodTarget, which owns the pod's lifecycle.

start() creates the run's objects (manifests.py) owner first, waits for the pod with watches,
and, with a server, forwards a loopback port to it for howfast's own SQL; the tools run in the
pod (hosts/pod.py, on the pod's PodDescription). stop() deletes every object carrying the
run's label and waits until they, and the volumes bound to their claims, are gone. Nothing
else in the cluster is touched.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from howfast.errors import HowfastError, UsageError
from howfast.hosts.pod import ExecResult, PodDescription, PodHost
from howfast.machine.memory import cap_problem
from howfast.model import TargetRecord
from howfast.targets import pgquery
from howfast.targets.base import Connection, PlannedConnection, PlannedTarget, Target
from howfast.targets.capabilities import (
    AppliesStepSettings,
    HasPods,
    HasServerLog,
    HasStorage,
    Restartable,
)
from howfast.targets.k8s import facts
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s.cluster import Cluster, PortForward, kubeconfig_namespace
from howfast.targets.k8s.spec import K8sOptions, K8sSpec

if TYPE_CHECKING:
    from howfast.hosts.base import Host
    from howfast.hosts.pod import PodExec

RESTART_TIMEOUT_S = 300


class K8sPodTarget(Target, HasStorage, HasPods):
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
    ) -> None:
        self.spec = spec
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

    # -- plan -------------------------------------------------------------------------------
    def plan(self, port: int | str = "PORT", writer: str = "") -> m.Plan:
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
        )

    def planned(self) -> PlannedTarget:
        """The pod as planned (node unknown), and every object start() creates, in order."""
        manifests = m.all_manifests(self.plan(), password="GENERATED-AT-RUN-TIME")
        return PlannedTarget(
            host=PodHost(self.planned_pod(), self._api),
            connection=self._planned_connection(),
            scratch_dir=self._scratch(),
            objects=tuple(manifests),
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

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> Connection | None:
        from howfast.store import liveness

        cluster = self.connect()
        listener: socket.socket | None = PortForward.reserve() if self.server else None
        port: int | str = int(listener.getsockname()[1]) if listener else "PORT"
        plan = self.plan(port, json.dumps(liveness.this_process().document()))
        password = secrets.token_urlsafe(24)
        try:
            self._started = True
            owner = cluster.create(m.owner_secret(plan, password))
            ref = {"name": plan.name, "uid": str(owner["metadata"]["uid"])}
            for manifest in m.dependents(plan, ref):
                cluster.create(manifest)
            claims = [c for c in (plan.data_claim, plan.wal_claim) if c]
            self.pod = cluster.wait_pod_ready(
                self.namespace, plan.name, claims, self.options.start_timeout_s
            )
            node_name = (self.pod.get("spec") or {}).get("nodeName")
            self.node = cluster.read("Node", str(node_name)) if node_name else None
        except BaseException:
            if listener is not None:
                listener.close()
            raise
        if listener is None:
            return None
        self.forward = PortForward(cluster, self.namespace, plan.name, listener)
        self.forward.start()
        self.connection = Connection(
            host="127.0.0.1",
            port=int(port),
            user=m.SUPERUSER,
            dbname="postgres",
            password=password,
        )
        self._wait_sql(30.0)
        return self.connection

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

    def exec_place(self) -> tuple[Cluster, str, str]:
        if self.cluster is None or self.pod is None:
            raise HowfastError(f"{self.name}: the pod is not running")
        return self.cluster, self.namespace, f"howfast-{self.token}"

    def stop(self) -> None:
        """Delete every object of this run (by its label), wait until they are gone."""
        if self.forward is not None:
            self.forward.close()
            self.forward = None
        self.connection = None
        if not self._started or self.cluster is None:
            return
        self._started = False
        warnings = self.cluster.delete_run(self.namespace, self.token)
        self.pod = None
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
        )


class K8sTarget(K8sPodTarget, HasServerLog, Restartable, AppliesStepSettings):
    """`k8s://CLASS`: PostgreSQL in the pod."""

    server = True

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
    """The cluster's exec for a target's pod, refused while the pod is not running (before
    start, after stop), as the target's own execs are (exec_place)."""

    def __init__(self, target: K8sPodTarget) -> None:
        self.target = target

    def exec(
        self, namespace: str, pod: str, container: str, command: list[str], *, timeout_s: float
    ) -> ExecResult:
        cluster, _, _ = self.target.exec_place()
        return cluster.exec(namespace, pod, container, command, timeout_s=timeout_s)

    def exec_stream(self, namespace: str, pod: str, container: str, command: list[str]) -> Any:
        cluster, _, _ = self.target.exec_place()
        return cluster.exec_stream(namespace, pod, container, command)
