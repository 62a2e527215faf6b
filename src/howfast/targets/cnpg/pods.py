"""The pods of a `cnpg://` target as executors use them: the client pod started and checked
(it reaches the -rw Service), and each instance pod as a host the samplers read through
(its `postgres` container by exec: /proc, its cgroup; nothing written there)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from howfast.errors import HowfastError
from howfast.hosts.pod import PodHost
from howfast.targets.capabilities import InstanceView
from howfast.targets.cnpg import client as c
from howfast.targets.cnpg import discovery as disc
from howfast.targets.k8s import facts
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s.cluster import Cluster, pod_ready

PORT = 5432


def start_client(
    cluster: Cluster,
    plan: c.ClientPlan,
    owner: Mapping[str, str],
    address: str,
    timeout_s: float,
) -> dict[str, Any]:
    """Create the client pod, wait until Ready, and until it reaches `address` (30 s)."""
    cluster.create(c.client_pod(plan, owner))
    name = c.client_pod_name(plan.token)
    pod = cluster.wait_pod_ready(plan.namespace, name, [], timeout_s)
    probe = (
        f"{m.PATH_SETUP}; i=0; until pg_isready -q -h {address} -p {PORT} -t 2; "
        "do i=$((i+1)); [ $i -ge 15 ] && exit 1; sleep 1; done"
    )
    out = cluster.exec(plan.namespace, name, m.TOOLS, ["/bin/sh", "-c", probe], timeout_s=60)
    if out.returncode != 0:
        raise HowfastError(f"the client pod cannot reach {address}:{PORT} (pg_isready, 30 s)")
    return pod


def instance_paths(pod: Mapping[str, Any]) -> dict[str, Path]:
    """Where an instance's data and WAL are in its container: PGDATA, and the WAL volume's
    pg_wal when the pod mounts one (else pg_wal under PGDATA, on the data volume)."""
    mounts = {
        str(v.get("mountPath"))
        for container in (pod.get("spec") or {}).get("containers") or []
        if container.get("name") == disc.POSTGRES_CONTAINER
        for v in container.get("volumeMounts") or []
    }
    wal_volume = str(Path(disc.WAL_DIR).parent) in mounts
    return {
        "data": Path(disc.PGDATA),
        "wal": Path(disc.WAL_DIR if wal_volume else f"{disc.PGDATA}/pg_wal"),
    }


def instance_views(
    cluster: Cluster, pods: Sequence[Mapping[str, Any]], primary: str, context: str | None
) -> list[InstanceView]:
    """The Ready instance pods (of the pods of the cluster's label), as hosts."""
    views = []
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if disc.INSTANCE_LABEL not in labels or not pod_ready(dict(pod)):
            continue
        if labels.get(disc.POD_ROLE_LABEL, "instance") != "instance":
            continue
        node_name = (pod.get("spec") or {}).get("nodeName")
        node = cluster.read("Node", str(node_name)) if node_name else None
        description = facts.existing_pod_description(
            pod, node, context=context, server_container=disc.POSTGRES_CONTAINER
        )
        name = str((pod.get("metadata") or {}).get("name"))
        views.append(InstanceView(name, name == primary, PodHost(description, cluster),
                                  instance_paths(pod)))  # fmt: skip
    return views
