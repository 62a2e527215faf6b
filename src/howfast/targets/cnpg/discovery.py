"""What a CloudNativePG cluster is made of, read from its Cluster object, its instance pods
and their claims (plain JSON, as the API returns them): the primary, each instance's node,
data and WAL volumes and their StorageClasses, and the replication design the Cluster asks
for. Pure: the executor (api.py) reads the objects, this decides what they say.

The facts come from CloudNativePG v1.27.1's API (api/v1/cluster_types.go) and labels
(pkg/utils/labels_annotations.go); docs/cloudnative-pg.md lists them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from howfast.errors import UsageError
from howfast.model import JSONValue

GROUP = "postgresql.cnpg.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
CLUSTER_LABEL = "cnpg.io/cluster"
INSTANCE_LABEL = "cnpg.io/instanceName"
ROLE_LABELS = ("cnpg.io/instanceRole", "role")  # the second is deprecated, still written
POD_ROLE_LABEL = "cnpg.io/podRole"  # "instance" (a pooler's pods say "pooler")
PVC_ROLE_LABEL = "cnpg.io/pvcRole"
PVC_ROLES = {"PG_DATA": "data", "PG_WAL": "wal"}
POSTGRES_CONTAINER = "postgres"
PGDATA = "/var/lib/postgresql/data/pgdata"
WAL_DIR = "/var/lib/postgresql/wal/pg_wal"
METRICS_PORT = 9187
HEALTHY_PHASE = "Cluster in healthy state"

VolumeRole = Literal["data", "wal"]


@dataclass(frozen=True)
class Volume:
    claim: str
    role: VolumeRole
    storage_class: str | None
    size: str | None  # the claim's capacity (else its request)
    volume_name: str | None  # the PersistentVolume bound to it

    def record(self) -> dict[str, JSONValue]:
        return {
            "claim": self.claim,
            "storage_class": self.storage_class,
            "size": self.size,
            "volume": self.volume_name,
        }


@dataclass(frozen=True)
class Instance:
    name: str  # the pod's name, the instance's name in the Cluster's status
    node: str | None
    role: str  # "primary", "replica" (the pod's label), "unknown"
    ready: bool
    address: str | None  # the pod's IP
    image: str | None
    data: Volume | None
    wal: Volume | None
    metrics_port: int | None  # 9187 when the pod declares its metrics port

    def record(self, primary: str) -> dict[str, JSONValue]:
        return {
            "name": self.name,
            "node": self.node,
            "primary": self.name == primary,
            "ready": self.ready,
            "data": None if self.data is None else self.data.record(),
            "wal": None if self.wal is None else self.wal.record(),
        }


@dataclass(frozen=True)
class SyncDesign:
    """`spec.postgresql.synchronous` (method, number, dataDurability), or the legacy
    `spec.minSyncReplicas`/`maxSyncReplicas`; both absent: asynchronous standbys."""

    method: str | None  # "any" (quorum), "first" (priority); None: not configured
    number: int
    durability: str | None  # "required" (the default when synchronous), "preferred"
    min_sync: int
    max_sync: int

    @property
    def synchronous(self) -> bool:
        return self.method is not None or self.max_sync > 0

    def describe(self) -> str:
        if self.method is not None:
            durability = self.durability or "required"
            text = f"synchronous ({self.method} {self.number}, dataDurability {durability})"
            if durability == "preferred":
                text += ": commits stop waiting when no standby is healthy"
            return text
        if self.max_sync > 0:
            return f"synchronous (minSyncReplicas {self.min_sync}, maxSyncReplicas {self.max_sync})"
        return "asynchronous: a failover may lose commits the primary acknowledged"

    def record(self) -> dict[str, JSONValue]:
        return {
            "synchronous": self.synchronous,
            "method": self.method,
            "number": self.number if self.method is not None else None,
            "data_durability": (self.durability or "required") if self.method else None,
            "min_sync_replicas": self.min_sync,
            "max_sync_replicas": self.max_sync,
            "describe": self.describe(),
        }


@dataclass(frozen=True)
class ClusterLayout:
    name: str
    namespace: str
    instances_wanted: int  # spec.instances
    current_primary: str  # status.currentPrimary
    target_primary: str  # status.targetPrimary: differs while the operator changes primary
    phase: str
    image: str | None  # status.image, else spec.imageName
    instances: tuple[Instance, ...]
    sync: SyncDesign
    data_class: str | None  # spec.storage.storageClass (None: the cluster's default class)
    wal_class: str | None  # spec.walStorage.storageClass
    wal_volume: bool  # spec.walStorage is set: WAL on a volume of its own
    data_size: str | None
    wal_size: str | None
    superuser_access: bool  # spec.enableSuperuserAccess

    @property
    def rw_service(self) -> str:
        return f"{self.name}-rw"

    def instance(self, name: str) -> Instance | None:
        return next((i for i in self.instances if i.name == name), None)

    def primary(self) -> Instance:
        found = self.instance(self.current_primary)
        if found is None:
            raise UsageError(
                f"Cluster {self.namespace}/{self.name}: its primary {self.current_primary!r} "
                "has no pod (the operator may be failing over): try again when it is healthy"
            )
        return found

    def standbys(self) -> tuple[Instance, ...]:
        return tuple(i for i in self.instances if i.name != self.current_primary)

    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted({i.node for i in self.instances if i.node}))

    def design_record(self) -> dict[str, JSONValue]:
        """The target's design as the run records it (docs/cloudnative-pg.md)."""
        return {
            "cluster": self.name,
            "namespace": self.namespace,
            "instances": self.instances_wanted,
            "primary": self.current_primary,
            "phase": self.phase,
            "image": self.image,
            "replication": self.sync.record(),
            "data_storage_class": self.data_class,
            "wal_storage_class": self.wal_class if self.wal_volume else None,
            "wal_on_data_volume": not self.wal_volume,
            "members": [i.record(self.current_primary) for i in self.instances],
        }


def _dig(obj: Mapping[str, Any] | None, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def sync_design(cluster: Mapping[str, Any]) -> SyncDesign:
    spec = cluster.get("spec") or {}
    sync = _dig(spec, "postgresql", "synchronous") or {}
    method = sync.get("method") if isinstance(sync, Mapping) else None
    return SyncDesign(
        method=str(method) if method else None,
        number=_int(sync.get("number")) if isinstance(sync, Mapping) else 0,
        durability=str(sync["dataDurability"]) if sync.get("dataDurability") else None,
        min_sync=_int(spec.get("minSyncReplicas")),
        max_sync=_int(spec.get("maxSyncReplicas")),
    )


def instance_role(labels: Mapping[str, str]) -> str:
    for label in ROLE_LABELS:
        if labels.get(label):
            return str(labels[label])
    return "unknown"


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = _dig(pod, "status", "conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def claim_volumes(claims: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], Volume]:
    """Each claim of an instance by (instance, role): PG_DATA and PG_WAL (tablespaces are
    left out: howfast measures the data and WAL volumes)."""
    out: dict[tuple[str, str], Volume] = {}
    for claim in claims:
        labels = _dig(claim, "metadata", "labels") or {}
        role = PVC_ROLES.get(str(labels.get(PVC_ROLE_LABEL)))
        instance = labels.get(INSTANCE_LABEL)
        if role is None or not instance:
            continue
        size = _dig(claim, "status", "capacity", "storage") or _dig(
            claim, "spec", "resources", "requests", "storage"
        )
        out[(str(instance), role)] = Volume(
            claim=str(_dig(claim, "metadata", "name")),
            role="data" if role == "data" else "wal",
            storage_class=_dig(claim, "spec", "storageClassName"),
            size=str(size) if size else None,
            volume_name=_dig(claim, "spec", "volumeName"),
        )
    return out


def _metrics_port(pod: Mapping[str, Any]) -> int | None:
    for container in _dig(pod, "spec", "containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == "metrics" or port.get("containerPort") == METRICS_PORT:
                return int(port.get("containerPort") or METRICS_PORT)
    return None


def instances_of(
    cluster_name: str, pods: Sequence[Mapping[str, Any]], claims: Sequence[Mapping[str, Any]]
) -> tuple[Instance, ...]:
    """The cluster's instance pods (label cnpg.io/cluster, podRole instance, not a pooler
    nor a Job), in name order, with their volumes."""
    volumes = claim_volumes(claims)
    out = []
    for pod in pods:
        labels = _dig(pod, "metadata", "labels") or {}
        if labels.get(CLUSTER_LABEL) != cluster_name or INSTANCE_LABEL not in labels:
            continue
        if labels.get(POD_ROLE_LABEL, "instance") != "instance":
            continue
        name = str(_dig(pod, "metadata", "name"))
        containers = {c.get("name"): c for c in _dig(pod, "spec", "containers") or []}
        image = (containers.get(POSTGRES_CONTAINER) or {}).get("image")
        out.append(
            Instance(
                name=name,
                node=_dig(pod, "spec", "nodeName"),
                role=instance_role(labels),
                ready=_ready(pod),
                address=_dig(pod, "status", "podIP"),
                image=image,
                data=volumes.get((name, "data")),
                wal=volumes.get((name, "wal")),
                metrics_port=_metrics_port(pod),
            )
        )
    return tuple(sorted(out, key=lambda i: i.name))


def layout(
    cluster: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
) -> ClusterLayout:
    """The cluster as its objects show it. UsageError when the object is not a Cluster."""
    if cluster.get("kind") != "Cluster" or not str(cluster.get("apiVersion", "")).startswith(GROUP):
        raise UsageError(f"not a CloudNativePG Cluster: {cluster.get('kind')!r}")
    name = str(_dig(cluster, "metadata", "name"))
    spec = cluster.get("spec") or {}
    status = cluster.get("status") or {}
    wal = spec.get("walStorage")
    return ClusterLayout(
        name=name,
        namespace=str(_dig(cluster, "metadata", "namespace") or "default"),
        instances_wanted=_int(spec.get("instances")),
        current_primary=str(status.get("currentPrimary") or ""),
        target_primary=str(status.get("targetPrimary") or ""),
        phase=str(status.get("phase") or ""),
        image=status.get("image") or spec.get("imageName"),
        instances=instances_of(name, pods, claims),
        sync=sync_design(cluster),
        data_class=_dig(spec, "storage", "storageClass"),
        wal_class=_dig(wal, "storageClass"),
        wal_volume=isinstance(wal, Mapping),
        data_size=_dig(spec, "storage", "size"),
        wal_size=_dig(wal, "size"),
        superuser_access=spec.get("enableSuperuserAccess") is True,
    )


def not_ready(layout: ClusterLayout) -> str | None:
    """Why a run cannot start on the cluster now (None: it can): no primary, a change of
    primary under way, the primary not Ready (a standby not Ready is allowed: right after a
    failover the old primary's pod is still being made again)."""
    where = f"Cluster {layout.namespace}/{layout.name}"
    if not layout.current_primary:
        return f"{where} has no primary yet (phase: {layout.phase or 'unknown'})"
    if layout.target_primary and layout.target_primary != layout.current_primary:
        return (
            f"{where} is changing its primary ({layout.current_primary} → "
            f"{layout.target_primary}; phase: {layout.phase})"
        )
    primary = layout.instance(layout.current_primary)
    if primary is None or not primary.ready:
        return f"{where}: its primary {layout.current_primary} is not Ready"
    if not layout.instances:
        return f"{where} has no instance pods"
    return None


def storage_classes(layout: ClusterLayout) -> dict[str, str | None]:
    """The classes of the data and WAL volumes: the claims' (what they were made with),
    else the spec's; "wal" only with a WAL volume."""
    data = next((i.data.storage_class for i in layout.instances if i.data), None)
    wal = next((i.wal.storage_class for i in layout.instances if i.wal), None)
    out: dict[str, str | None] = {"data": data or layout.data_class}
    if layout.wal_volume:
        out["wal"] = wal or layout.wal_class
    return out
