"""What a Kubernetes target's record says about where it ran, from API objects (plain dicts).
Pure: target.py reads the objects, these pick the fields `compare` should show."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from howfast.model import JSONValue

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
