"""What a Kubernetes target's record says about where it ran, and what its host needs to know
of its pod (pod_description), from API objects (plain dicts). Pure: target.py reads the
objects, these pick the fields `compare` should show and the facts PodHost works from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Any

from howfast.errors import UsageError
from howfast.hosts.pod import NodeFacts, PodDescription
from howfast.model import JSONValue
from howfast.targets.k8s.manifests import PATH_SETUP
from howfast.targets.k8s.spec import parse_quantity_bytes

NODE_LABELS = (
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "kubernetes.io/arch",
)


def _str_map(value: Any) -> dict[str, JSONValue]:
    return {str(k): str(v) for k, v in (value or {}).items()}


def storage_class_facts(sc: Mapping[str, Any] | None) -> dict[str, JSONValue]:
    if not sc:
        return {}
    return {
        "name": str((sc.get("metadata") or {}).get("name", "")),
        "provisioner": sc.get("provisioner"),
        "parameters": _str_map(sc.get("parameters")),
        "reclaim_policy": sc.get("reclaimPolicy"),
        "binding_mode": sc.get("volumeBindingMode"),
        "allow_expansion": sc.get("allowVolumeExpansion"),
        "mount_options": list(sc.get("mountOptions") or []),
    }


def volume_facts(
    pvc: Mapping[str, Any] | None, pv: Mapping[str, Any] | None
) -> dict[str, JSONValue]:
    out: dict[str, JSONValue] = {}
    if pvc:
        out["claim"] = str((pvc.get("metadata") or {}).get("name", ""))
        out["requested"] = str(
            ((pvc.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage", "")
        )
        out["capacity"] = str(((pvc.get("status") or {}).get("capacity") or {}).get("storage", ""))
    if pv:
        spec = pv.get("spec") or {}
        out["volume"] = str((pv.get("metadata") or {}).get("name", ""))
        csi = spec.get("csi")
        if csi:
            out["csi_driver"] = csi.get("driver")
            out["volume_attributes"] = _str_map(csi.get("volumeAttributes"))
            out["fstype"] = csi.get("fsType")
        for kind in ("local", "hostPath"):
            if spec.get(kind):
                out["path"] = spec[kind].get("path")
                out["source"] = kind
        out["volume_mode"] = spec.get("volumeMode")
        out["mount_options"] = list(spec.get("mountOptions") or [])
    return out


def node_facts(node: Mapping[str, Any] | None) -> dict[str, JSONValue]:
    if not node:
        return {}
    info = (node.get("status") or {}).get("nodeInfo") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return {
        "name": str((node.get("metadata") or {}).get("name", "")),
        "kernel": info.get("kernelVersion"),
        "os_image": info.get("osImage"),
        "container_runtime": info.get("containerRuntimeVersion"),
        "kubelet": info.get("kubeletVersion"),
        "labels": {k: str(labels[k]) for k in NODE_LABELS if k in labels},
        "allocatable_cpu": str(allocatable.get("cpu", "")),
        "allocatable_memory": str(allocatable.get("memory", "")),
    }


def pod_facts(pod: Mapping[str, Any] | None) -> dict[str, JSONValue]:
    if not pod:
        return {}
    containers = (pod.get("spec") or {}).get("containers") or []
    return {
        "name": str((pod.get("metadata") or {}).get("name", "")),
        "qos_class": (pod.get("status") or {}).get("qosClass"),
        "node": (pod.get("spec") or {}).get("nodeName"),
        "resources": {
            str(c["name"]): {
                "requests": _str_map((c.get("resources") or {}).get("requests")),
                "limits": _str_map((c.get("resources") or {}).get("limits")),
            }
            for c in containers
        },
        "images": {str(c["name"]): str(c.get("image", "")) for c in containers},
    }


def cpu_cores(quantity: str) -> int | None:
    """Whole cores in a CPU quantity ("4", "3500m"), at least 1."""
    try:
        value = float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)
    except ValueError:
        return None
    return max(1, int(value))


def node_description(node: Mapping[str, Any] | None) -> NodeFacts:
    """What a PodHost needs of a node: its name, allocatable cores and memory (None when
    not known: the pod is not scheduled yet, or the node cannot be read)."""
    if not node:
        return NodeFacts()
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    cores = cpu_cores(str(allocatable.get("cpu", ""))) if allocatable else None
    try:
        memory: int | None = parse_quantity_bytes(str(allocatable["memory"]))
    except (KeyError, ValueError):
        memory = None
    name = (node.get("metadata") or {}).get("name")
    return NodeFacts(str(name) if name else None, cores, memory)


def pod_description(
    pod: Mapping[str, Any] | None,
    node: Mapping[str, Any] | None,
    *,
    planned: PodDescription,
) -> PodDescription:
    """The description of a pod as the cluster shows it (its name, its containers' images)
    and of its node, over what was `planned` (the containers' roles and mounts, which the
    pod's creator knows). Pure: any Kubernetes-based target builds its PodHost with it, for a
    pod howfast created or one it did not."""
    if not pod:
        return replace(planned, node=node_description(node))
    metadata = pod.get("metadata") or {}
    containers = (pod.get("spec") or {}).get("containers") or []
    images = {str(c["name"]): str(c.get("image", "")) for c in containers} or planned.images
    return replace(
        planned,
        pod=str(metadata.get("name") or planned.pod),
        namespace=str(metadata.get("namespace") or planned.namespace),
        images=images,
        node=node_description(node),
    )


DEFAULT_PGDATA = "/var/lib/postgresql/data"  # the official image's PGDATA


def existing_pod_description(
    pod: Mapping[str, Any],
    node: Mapping[str, Any] | None,
    *,
    context: str | None,
    server_container: str | None,
    tools_container: str | None = None,
    work_dir: str = "/tmp",
    path_setup: str = PATH_SETUP,
) -> PodDescription:
    """The description of a pod howfast did not create (a database a user runs, a standby
    made by an operator), from its Pod and Node objects and the name of its PostgreSQL
    container: nothing of howfast's manifests is assumed. The tools run in
    `tools_container` (default: the server's own container, which has PostgreSQL's
    programs); PostgreSQL's data directory is the server container's PGDATA (the official
    image's default without one); the volumes under test are under the mount that holds it;
    the server's memory is its container's limit. `work_dir` must be writable there (it is
    not the storage under test; a memory-backed one is better). Pure."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    containers = {str(c["name"]): c for c in spec.get("containers") or []}
    if server_container is not None and server_container not in containers:
        raise UsageError(
            f"pod {metadata.get('name')} has no container {server_container!r} "
            f"(it has {', '.join(containers) or 'none'})"
        )
    tools = tools_container or server_container or next(iter(containers), "")
    if tools not in containers:
        raise UsageError(f"pod {metadata.get('name')} has no container {tools!r}")
    server = containers.get(server_container or "") or {}
    env = {str(e.get("name")): e.get("value") for e in server.get("env") or []}
    data_dir = str(env.get("PGDATA") or DEFAULT_PGDATA)
    limit = ((server.get("resources") or {}).get("limits") or {}).get("memory")
    try:
        memory = parse_quantity_bytes(str(limit)) if limit else None
    except ValueError:
        memory = None
    return PodDescription(
        context=context,
        namespace=str(metadata.get("namespace") or "default"),
        pod=str(metadata.get("name") or ""),
        tools_container=tools,
        server_container=server_container,
        data_dir=data_dir,
        work_dir=work_dir,
        volume_root=volume_root(data_dir, containers[tools]),
        path_setup=path_setup,
        node=node_description(node),
        memory_limit_bytes=memory,
        images={name: str(c.get("image", "")) for name, c in containers.items()},
    )


def volume_root(path: str, container: Mapping[str, Any]) -> str:
    """Where the volume holding `path` is mounted in `container`, one level up: the paths
    PodHost.same_filesystem compares lie under it ("" when no mount holds `path`: then
    every absolute path does)."""
    mounts = [str(m.get("mountPath", "")).rstrip("/") for m in container.get("volumeMounts") or []]
    holding = [m for m in mounts if m and (path == m or path.startswith(m + "/"))]
    if not holding:
        return ""  # every absolute path is under "" + "/"
    return str(PurePosixPath(max(holding, key=len)).parent).rstrip("/")
