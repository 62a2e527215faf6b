"""`k8s://CLASS[?wal=CLASS2]`, `k8s://emptyDir[?medium=Memory]`, with standbys
`k8s://CLASS?replicas=N&sync=LEVEL&standby_class=CLASS2`, and the Kubernetes options of
`howfast run` / `howfast probe`. Pure: nothing here talks to a cluster."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from typing import Literal
from urllib.parse import parse_qsl, urlsplit

from howfast.design import unknown_key
from howfast.errors import UsageError

SCHEME = "k8s://"
EMPTY_DIR = "emptyDir"
# Images that work on a connected cluster; every one can be overridden (--image, --fio-image),
# and deploy/Dockerfile builds one image with PostgreSQL, pgbench and fio for air-gapped ones.
DEFAULT_IMAGE = "docker.io/library/postgres:17-bookworm"
DEFAULT_FIO_IMAGE = "ghcr.io/kastenhq/kubestr:latest"  # kubestr's image: fio on Alpine
DEFAULT_VOLUME_SIZE = "10Gi"
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
PULL_POLICY_ENV = "HOWFAST_K8S_PULL_POLICY"
START_TIMEOUT_ENV = "HOWFAST_K8S_START_TIMEOUT"
DEFAULT_START_TIMEOUT_S = 300.0
# synchronous-commit levels of ?sync= (issue 28): "off" means asynchronous standbys
SYNC_LEVELS = ("off", "local", "remote_write", "on", "remote_apply")
MAX_REPLICAS = 8
QUERY_KEYS = ("wal", "medium", "replicas", "sync", "standby_class", "client", "client_node")
DESIGN_QUERY_KEYS = ("replicas", "sync", "standby_class", "client", "client_node")
# Where pgbench and the round-trip probe run (issue 28): a client pod of their own (the
# default) or the server's pod
K8sClient = Literal["pod", "same-pod"]
CLIENT_PLACEMENTS: tuple[K8sClient, ...] = ("pod", "same-pod")
DEFAULT_CLIENT: K8sClient = "pod"
# DNS-1123 subdomain: StorageClass names
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|Pi|M|G|T|P|E|Ei)?$")


@dataclass(frozen=True)
class VolumeSpec:
    """Where a role's data lives: a PVC of a StorageClass, or an emptyDir (disk or memory)."""

    storage_class: str | None  # None: an emptyDir
    medium: str = ""  # emptyDir only: "" (the node's disk) or "Memory"
    attributes_class: str | None = None  # a VolumeAttributesClass for the claim (fleets)

    @property
    def describe(self) -> str:
        if self.storage_class is not None:
            return f"StorageClass {self.storage_class}"
        return "emptyDir in memory" if self.medium == "Memory" else "emptyDir on the node's disk"


@dataclass(frozen=True)
class K8sSpec:
    text: str
    data: VolumeSpec
    wal: VolumeSpec | None = None
    replicas: int = 0  # standby pods streaming from the primary
    sync: str = "off"  # their synchronous-commit level (SYNC_LEVELS); "on" by default
    standby_class: str | None = None  # the standbys' volumes; None: the data volume's kind
    sync_given: bool = False  # ?sync= or --sync said the level (else "on" by default)
    client: str | None = None  # ?client= (CLIENT_PLACEMENTS); None: not said in the text
    client_node: str | None = None  # ?client_node=

    @property
    def standby_volume(self) -> VolumeSpec:
        return VolumeSpec(self.standby_class) if self.standby_class else self.data

    def design_keys(self) -> list[str]:
        """The design keys the text gave (what a probe or a fleet refuses)."""
        query = dict(parse_qsl(urlsplit(self.text).query, keep_blank_values=True))
        return [k for k in DESIGN_QUERY_KEYS if k in query]


def _design(text: str, query: dict[str, str]) -> tuple[int, str, str | None]:
    """?replicas=N (0..8), ?sync=LEVEL (on when standbys are asked), ?standby_class=CLASS."""
    replicas = 0
    if "replicas" in query:
        try:
            replicas = int(query["replicas"])
        except ValueError:
            raise UsageError(f"{text}: replicas={query['replicas']!r} is not a number") from None
        if not 0 <= replicas <= MAX_REPLICAS:
            raise UsageError(
                f"{text}: replicas={replicas} is not in the range 0<=x<={MAX_REPLICAS}"
            )
    sync = query.get("sync")
    if sync is not None and sync not in SYNC_LEVELS:
        raise UsageError(f"{text}: sync={sync!r} is not one of {', '.join(SYNC_LEVELS)}")
    standby_class = query.get("standby_class")
    if replicas == 0 and (sync is not None or standby_class is not None):
        given = "sync" if sync is not None else "standby_class"
        raise UsageError(f"{text}: {given} needs standbys: give ?replicas=N (N >= 1)")
    if standby_class is not None and not _NAME.match(standby_class):
        raise UsageError(f"{text}: standby_class={standby_class!r} is not a StorageClass name")
    return replicas, (sync or "on") if replicas else "off", standby_class


def parse_target(text: str) -> K8sSpec:
    """k8s://CLASS, k8s://CLASS?wal=CLASS2, k8s://emptyDir, k8s://emptyDir?medium=Memory;
    standbys: ?replicas=N&sync=LEVEL&standby_class=CLASS2."""
    if not text.startswith(SCHEME):
        raise UsageError(f"{text!r} is not a k8s:// target")
    parts = urlsplit(text)
    name = parts.netloc + parts.path.rstrip("/")
    usage = "give k8s://STORAGECLASS, k8s://CLASS?wal=CLASS2 or k8s://emptyDir?medium=Memory"
    if not name:
        raise UsageError(f"{text}: no StorageClass named", usage)
    try:
        query = dict(parse_qsl(parts.query, keep_blank_values=True, strict_parsing=True))
    except ValueError:
        raise UsageError(f"{text}: cannot read the query {parts.query!r}", usage) from None
    unknown = sorted(set(query) - set(QUERY_KEYS))
    if unknown:
        raise UsageError(f"{text}: {unknown_key(unknown[0], QUERY_KEYS)}", usage)
    medium = query.get("medium", "")
    if name == EMPTY_DIR:
        if medium not in ("", "Memory"):
            raise UsageError(f"{text}: medium must be Memory (or absent: the node's disk)")
        data = VolumeSpec(None, medium)
    else:
        if "medium" in query:
            raise UsageError(f"{text}: medium applies to k8s://emptyDir only")
        if not _NAME.match(name):
            raise UsageError(f"{text}: {name!r} is not a StorageClass name", usage)
        data = VolumeSpec(name)
    wal = None
    if "wal" in query:
        wal_class = query["wal"]
        if not _NAME.match(wal_class):
            raise UsageError(f"{text}: wal={wal_class!r} is not a StorageClass name", usage)
        wal = VolumeSpec(wal_class)
    replicas, sync, standby_class = _design(text, query)
    client = query.get("client")
    if client is not None:
        check_client(client, f"{text}: client=")
    client_node = query.get("client_node")
    if client_node is not None and not _NAME.match(client_node):
        raise UsageError(f"{text}: client_node={client_node!r} is not a node name")
    return K8sSpec(
        text, data, wal, replicas, sync, standby_class, "sync" in query, client, client_node
    )


def check_client(placement: str, where: str) -> K8sClient:
    """A k8s:// client placement; UsageError naming the local ones as such."""
    if placement in ("socket", "tcp"):
        raise UsageError(
            f"{where}{placement} is for directory targets: a k8s:// target's client runs in "
            "a client pod (pod, the default) or in the server's pod (same-pod)"
        )
    if placement not in CLIENT_PLACEMENTS:
        raise UsageError(f"{where}{placement!r} is not one of {', '.join(CLIENT_PLACEMENTS)}")
    return placement


def client_design(
    spec: K8sSpec, client: str | None, client_node: str | None
) -> tuple[K8sClient, str | None]:
    """Where the target's client runs, and on which node: the text's ?client= and
    ?client_node= over the run's --client and --client-node; a client pod by default."""
    placement = check_client(spec.client or client or DEFAULT_CLIENT, "--client ")
    node = spec.client_node or client_node
    if node is not None and placement == "same-pod":
        raise UsageError(
            f"{spec.text}: --client-node places a client pod; with --client same-pod pgbench "
            "runs in the server's pod, on the server's node: drop one of them"
        )
    return placement, node


def with_run_design(spec: K8sSpec, replicas: int | None, sync: str | None) -> K8sSpec:
    """The run's --replicas and --sync (or a plan's [design]) under what the target's text
    says: the text wins, key by key."""
    said = spec.design_keys()
    count = spec.replicas if "replicas" in said or replicas is None else replicas
    level = spec.sync if "sync" in said else sync
    given = "sync" in said or sync is not None
    if count == 0:
        if given and "sync" in said:
            return spec  # parse_target refused it already unless replicas were given
        if given:
            raise UsageError("--sync needs standbys: give --replicas N (N >= 1) or ?replicas=N")
        return replace(spec, replicas=0, sync="off")
    return replace(spec, replicas=count, sync=level or "on", sync_given=given)


def check_quantity(value: str | None, option: str) -> str | None:
    """A Kubernetes quantity (20Gi, 500m, 2); UsageError otherwise."""
    if value is None:
        return None
    if not _QUANTITY.match(value.strip()):
        raise UsageError(f"{option} {value!r} is not a Kubernetes quantity (e.g. 20Gi, 500m, 2)")
    return value.strip()


def kube_quantity_bytes(value: int) -> str:
    """Bytes as a quantity: Mi when it divides, else plain bytes."""
    return f"{value // 2**20}Mi" if value % 2**20 == 0 else str(value)


def parse_quantity_bytes(value: str) -> int:
    """A memory/storage quantity in bytes (20Gi, 512Mi, 1G, 1000)."""
    factors = {
        "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
        "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
        "m": 0.001,
    }  # fmt: skip
    match = re.match(r"^([0-9.]+)([a-zA-Z]*)$", value.strip())
    if not match or match.group(2) not in factors:
        raise ValueError(f"not a quantity: {value!r}")
    return int(float(match.group(1)) * factors[match.group(2)])


def parse_cpu(value: str) -> float:
    """A CPU quantity in cores (2, 500m, 1.5)."""
    value = value.strip()
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


@dataclass(frozen=True)
class K8sOptions:
    """The Kubernetes options of `howfast run` / `howfast probe`."""

    namespace: str | None = None  # None: the kubeconfig context's, else "default"
    context: str | None = None
    volume_size: str = DEFAULT_VOLUME_SIZE
    image: str = DEFAULT_IMAGE
    fio_image: str = DEFAULT_FIO_IMAGE
    node: str | None = None
    cpu: str | None = None
    memory_bytes: int | None = None  # --memory: the server container's request and limit
    pull_policy: str | None = None  # None: Kubernetes' default for the image
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S

    @classmethod
    def build(
        cls,
        *,
        namespace: str | None = None,
        context: str | None = None,
        volume_size: str | None = None,
        image: str | None = None,
        fio_image: str | None = None,
        node: str | None = None,
        cpu: str | None = None,
        memory_bytes: int | None = None,
    ) -> K8sOptions:
        """Validated options; the pull policy and start time-out come from the environment
        (HOWFAST_K8S_PULL_POLICY=Never for images imported by hand, as in the test lab)."""
        pull = os.environ.get(PULL_POLICY_ENV) or None
        if pull is not None and pull not in PULL_POLICIES:
            raise UsageError(f"{PULL_POLICY_ENV}={pull!r}: give one of {', '.join(PULL_POLICIES)}")
        timeout_text = os.environ.get(START_TIMEOUT_ENV)
        try:
            timeout = float(timeout_text) if timeout_text else DEFAULT_START_TIMEOUT_S
        except ValueError:
            raise UsageError(f"{START_TIMEOUT_ENV}={timeout_text!r}: give seconds") from None
        if cpu is not None:
            check_quantity(cpu, "--cpu")
            if parse_cpu(cpu) <= 0:
                raise UsageError(f"--cpu {cpu!r} must be more than 0")
        if namespace is not None and not re.match(
            r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", namespace
        ):
            raise UsageError(f"--namespace {namespace!r} is not a namespace name")
        return cls(
            namespace=namespace,
            context=context,
            volume_size=check_quantity(volume_size, "--volume-size") or DEFAULT_VOLUME_SIZE,
            image=image or DEFAULT_IMAGE,
            fio_image=fio_image or DEFAULT_FIO_IMAGE,
            node=node,
            cpu=cpu,
            memory_bytes=memory_bytes,
            pull_policy=pull,
            start_timeout_s=timeout,
        )
