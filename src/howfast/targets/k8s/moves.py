"""The server's pod deleted and made again, on its node or another (issue 29's `delete-pod`
and `move` events): which nodes can take it, whether its data can follow it, and the manifest
of the new pod. Pure: the cluster's objects in, sentences and manifests out; the target
(target.py) reads the cluster and acts.

A pod can go to another node only when its volumes are reachable there: a PersistentVolume
whose node affinity names one node (local-path, local volumes) keeps the pod on that node.
That is known from the StorageClass for some provisioners (no provisioner: local volumes;
`allowedTopologies` naming one node) before anything is created, and for every class from the
PersistentVolume once the claim is bound, before the first step.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from howfast.targets.k8s.spec import K8sSpec

HOSTNAME_LABEL = "kubernetes.io/hostname"
LOCAL_PROVISIONER = "kubernetes.io/no-provisioner"
# Taints that keep a pod without a matching toleration (howfast's have none) off a node
REPELLING = ("NoSchedule", "NoExecute")


def schedulable(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """The names of the nodes a new pod of the run can go to: Ready, not cordoned, without a
    taint that repels pods (howfast's tolerate none)."""
    out = []
    for node in nodes:
        spec = node.get("spec") or {}
        if spec.get("unschedulable"):
            continue
        if any(t.get("effect") in REPELLING for t in spec.get("taints") or []):
            continue
        conditions = (node.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            continue
        out.append(str(node["metadata"]["name"]))
    return sorted(out)


def _matches(requirement: Mapping[str, Any], values: Mapping[str, str]) -> bool:
    """One node selector requirement against a node's labels (or fields)."""
    key, operator = requirement.get("key"), requirement.get("operator")
    wanted = [str(v) for v in requirement.get("values") or []]
    present = key in values
    value = values.get(str(key))
    if operator == "In":
        return present and value in wanted
    if operator == "NotIn":
        return not present or value not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and wanted:
        try:
            number, bound = int(str(value)), int(wanted[0])
        except ValueError:
            return False
        return number > bound if operator == "Gt" else number < bound
    return False


def term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """A nodeSelectorTerm: every expression on the node's labels and every field matches."""
    meta = node.get("metadata") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    fields = {"metadata.name": str(meta.get("name", ""))}
    return all(_matches(r, labels) for r in term.get("matchExpressions") or []) and all(
        _matches(r, fields) for r in term.get("matchFields") or []
    )


def volume_nodes(pv: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> list[str] | None:
    """The nodes a PersistentVolume can be used on, by its node affinity (a term matching is
    enough); None when it has none: every node reaches it."""
    required = (((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return None
    return sorted(
        str(node["metadata"]["name"])
        for node in nodes
        if any(term_matches(term, node) for term in terms)
    )


def class_pins(storage_class: Mapping[str, Any] | None) -> str | None:
    """Why a StorageClass's volumes stay on the node they were made on, when the class says so
    before any volume exists; None when it does not (its volumes may still, once bound)."""
    if not storage_class:
        return None
    name = (storage_class.get("metadata") or {}).get("name", "?")
    if storage_class.get("provisioner") == LOCAL_PROVISIONER:
        return (
            f"StorageClass {name} has local PersistentVolumes (no provisioner): each stays on "
            "its node"
        )
    for topology in storage_class.get("allowedTopologies") or []:
        for expression in topology.get("matchLabelExpressions") or []:
            if expression.get("key") == HOSTNAME_LABEL and len(expression.get("values") or []) == 1:
                node = expression["values"][0]
                return f"StorageClass {name} makes volumes on node {node} only (allowedTopologies)"
    return None


def spec_pins(spec: K8sSpec) -> str | None:
    """Why the target's data is lost with its pod, whatever the cluster: an emptyDir."""
    for role, volume in (("data", spec.data), ("WAL", spec.wal)):
        if volume is not None and volume.storage_class is None:
            return (
                f"the {role} is on an emptyDir, which is deleted with its pod: give a "
                "StorageClass (k8s://CLASS)"
            )
    return None


def pinned_by_volumes(
    volumes: Mapping[str, Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]], here: str
) -> str | None:
    """Why the pod cannot leave node `here` because a volume (by claim name) is tied to it:
    its node affinity admits no other node. None when every volume reaches another node."""
    for claim, pv in volumes.items():
        reach = volume_nodes(pv, nodes)
        if reach is not None and not [n for n in reach if n != here]:
            name = (pv.get("metadata") or {}).get("name", "?")
            klass = (pv.get("spec") or {}).get("storageClassName") or "?"
            return (
                f"claim {claim}'s volume {name} (StorageClass {klass}) is tied to node "
                f"{', '.join(reach) or here} by its node affinity: its pod cannot move; use a "
                "class whose volumes every node reaches (network storage)"
            )
    return None


def move_refusal(
    asked: str | None, schedulable_nodes: Sequence[str], all_nodes: Sequence[str]
) -> str | None:
    """Why a move to `asked` (None: any other node) cannot happen on this cluster, before
    the pod exists (its node is not known yet)."""
    if asked is not None:
        if asked not in all_nodes:
            return f"the cluster has no node {asked} (its nodes: {', '.join(all_nodes)})"
        if asked not in schedulable_nodes:
            return f"node {asked} takes no new pods (cordoned, tainted or not Ready)"
    if len(schedulable_nodes) < 2:
        found = ", ".join(schedulable_nodes) or "none"
        return (
            f"a move needs a second node that takes pods: the cluster has "
            f"{len(schedulable_nodes)} ({found})"
        )
    return None


def drain_refusal(
    node: str, schedulable_nodes: Sequence[str], all_nodes: Sequence[str]
) -> str | None:
    """Why `node` cannot be drained during a step: no such node, or no other node that takes
    pods to send the server's pod to."""
    if node not in all_nodes:
        return f"the cluster has no node {node} (its nodes: {', '.join(all_nodes)})"
    if not [n for n in schedulable_nodes if n != node]:
        return (
            f"draining {node} needs another node that takes pods: the cluster has none "
            f"(nodes taking pods: {', '.join(schedulable_nodes) or 'none'})"
        )
    return None


def destination(asked: str | None, schedulable_nodes: Sequence[str], here: str) -> str:
    """The node a move goes to: the one asked, else the first schedulable one that is not
    `here`. ValueError saying why there is none."""
    if asked is not None:
        if asked == here:
            raise ValueError(f"the server's pod already runs on {asked}")
        if asked not in schedulable_nodes:
            raise ValueError(f"node {asked} takes no new pods now")
        return asked
    others = [n for n in schedulable_nodes if n != here]
    if not others:
        raise ValueError(f"no node other than {here} takes new pods now")
    return others[0]


def pod_on(manifest: Mapping[str, Any], node: str | None) -> dict[str, Any]:
    """A copy of the server's pod manifest to create again; on `node` (a required node
    affinity replacing the one it had) when given, else as it was (the same --node, if any)."""
    out = copy.deepcopy(dict(manifest))
    if node is None:
        return out
    affinity = dict(out["spec"].get("affinity") or {})
    affinity["nodeAffinity"] = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        }
    }
    out["spec"]["affinity"] = affinity
    return out
