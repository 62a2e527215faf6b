"""What a K8sPodTarget holds (its constructor, target.py, sets every field): declared once
here, so that each of its parts (pod_plan.py, pod_checks.py, pod_lifecycle.py) is checked
against the same fields."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass
from typing import Any, ClassVar

from howfast.hosts.pod import PodHost
from howfast.targets.base import Connection
from howfast.targets.k8s import client_manifests as cm
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s import network as net
from howfast.targets.k8s.cluster import Cluster, PortForward
from howfast.targets.k8s.pod_shells import RunningPod
from howfast.targets.k8s.spec import K8sOptions, K8sSpec
from howfast.targets.k8s.standby import PodStandby, WalSender


@dataclass(frozen=True)
class ObjectsMade:
    """The run's objects created, what start() needs to finish (pod_lifecycle.py): the pod
    is `held` when made ahead (its server waits to be released)."""

    cluster: Cluster
    plan: m.Plan
    owner: dict[str, str]  # the owner Secret's name and uid, for the later objects
    password: str
    listener: socket.socket | None  # pod mode: the port-forward's port, reserved
    held: bool


class PodTargetState:
    """The fields of a pod target (comments at their assignment, target.py)."""

    server: ClassVar[bool]  # whether the pod runs PostgreSQL
    spec: K8sSpec
    client_mode: cm.Placement
    client_node: str | None
    options: K8sOptions
    settings: dict[str, str]
    checksums: bool
    name: str
    token: str
    namespace: str
    cluster: Cluster | None
    connection: Connection | None
    forward: PortForward | None
    pod: dict[str, Any] | None
    node: dict[str, Any] | None
    step_settings: dict[str, str]
    _host: PodHost | None
    _started: bool
    _api: RunningPod
    mode: net.NetworkMode
    port: int | str
    standby_pods: list[PodStandby]
    senders: dict[str, WalSender]
    warnings: list[str]
    password: str | None
    client_pod: dict[str, Any] | None
    client_pod_node: dict[str, Any] | None
    pod_manifest: dict[str, Any] | None
    recreations: list[tuple[str | None, bool]]
    drains: list[str]
    cordoned_nodes: set[str]
    node_changes_allowed: bool
    _objects: threading.Lock
    _ahead: ObjectsMade | Exception | None
