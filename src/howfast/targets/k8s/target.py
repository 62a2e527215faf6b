"""`k8s://CLASS`: PostgreSQL in a pod whose data (and WAL) live on volumes of a StorageClass
(K8sTarget); `howfast probe k8s://CLASS`: a pod on such a volume, without a server
(K8sVolumeTarget). Both are a K8sPodTarget, which owns the pod's lifecycle.

start() creates the run's objects (manifests.py) owner first, waits for the pod with watches,
and, with a server, forwards a loopback port to it for howfast's own SQL; the tools run in the
pod (hosts/pod.py, on the pod's PodDescription). With `?replicas=N` the standby pods come
next (standby.py), each waited for until it streams and has caught up. stop() deletes every
object carrying the run's label and waits until they, and the volumes bound to their claims,
are gone. Nothing else in the cluster is touched.

K8sPodTarget is made of parts (docs/architecture.md): its fields (pod_state.py), its plan
(pod_plan.py), checks (pod_checks.py), lifecycle (pod_lifecycle.py), what pod events do
(pod_events.py, K8sTarget's) and the shells its hosts exec in (pod_shells.py).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from howfast.errors import HowfastError
from howfast.hosts.pod import PodHost
from howfast.model import JSONValue, TargetRecord
from howfast.targets import pgquery
from howfast.targets.base import Connection, Target
from howfast.targets.capabilities import (
    AppliesStepSettings,
    ClientPlacement,
    HasClient,
    HasPods,
    HasServerLog,
    HasStorage,
    Restartable,
    StartsAhead,
    StopsAside,
)
from howfast.targets.k8s import client_manifests as cm
from howfast.targets.k8s import facts
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s import network as net
from howfast.targets.k8s.cluster import Cluster, PortForward, kubeconfig_namespace
from howfast.targets.k8s.pod_events import PodEventsFacet
from howfast.targets.k8s.pod_lifecycle import PodLifecycleFacet
from howfast.targets.k8s.pod_shells import RunningPod
from howfast.targets.k8s.pod_state import ObjectsMade
from howfast.targets.k8s.spec import K8sOptions, K8sSpec
from howfast.targets.k8s.standby import PodStandby, WalSender

__all__ = ["K8sPodTarget", "K8sTarget", "K8sVolumeTarget", "RunningPod"]

RESTART_TIMEOUT_S = 300


class K8sPodTarget(PodLifecycleFacet, Target, HasStorage, HasPods, StopsAside, StartsAhead):
    """A pod howfast creates on volumes of a StorageClass: its objects, its lifecycle, its
    host. K8sTarget runs PostgreSQL in it; K8sVolumeTarget only the storage probes."""

    kind = "k8s"

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
        # Made by start_ahead() (while the previous target measures), finished by start();
        # or why making them failed, which start() raises.
        self._ahead: ObjectsMade | Exception | None = None

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
    PodEventsFacet,
    HasServerLog,
    Restartable,
    AppliesStepSettings,
    HasClient,
):
    """`k8s://CLASS`: PostgreSQL in the pod."""

    server = True

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
