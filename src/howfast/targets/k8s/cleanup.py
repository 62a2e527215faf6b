"""What killed runs left in a cluster, found by howfast's labels only.

Each run's objects share `howfast.dev/run=<token>`; its owner Secret carries the howfast
process that created it (host, boot id, PID, start time: store/liveness.py). A run is a
leftover when that process is certainly gone; a run of a live process is left alone, and one
from another machine (whose process cannot be seen from here) only with --force.

An in-cluster run (`run --in-cluster`: a ConfigMap owns a Job) has no such process here: it is
running while its pod is, then waits for `howfast fetch` (removed only with --force); without
a pod it is a leftover.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from howfast.errors import HowfastError
from howfast.store import liveness
from howfast.targets.k8s import incluster_manifests as icm
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s.cluster import Cluster
from howfast.targets.k8s.names import CORDONED_BY


@dataclass
class RunObjects:
    namespace: str
    token: str
    objects: list[tuple[str, str]] = field(default_factory=list)  # (kind, name)
    target: str | None = None
    state: str = "unknown"  # "gone" (a leftover), "running", "unknown" (another machine)
    writer: str | None = None


def classify(writer_text: str | None, here: liveness.Writer) -> tuple[str, str | None]:
    """(state, who): gone, running or unknown, from the owner's writer annotation."""
    if not writer_text:
        return "gone", None  # no owner (it went first) or no writer: nothing runs it
    try:
        writer = liveness.Writer.from_document(json.loads(writer_text))
    except ValueError:
        writer = None
    if writer is None:
        return "unknown", None
    who = f"pid {writer.pid} on {writer.host}"
    if liveness.is_gone(writer, here):
        return "gone", who
    if writer.host == here.host and writer.pid_ns == here.pid_ns:
        # a killed howfast its parent has not collected yet still shows its PID
        return ("gone" if liveness.is_zombie(writer.pid) else "running"), who
    return "unknown", who


def in_cluster_state(token: str, phases: list[str]) -> tuple[str, str | None]:
    """(state, who) of an in-cluster run from its pod's phase."""
    job = icm.job_name(token)
    if any(phase in ("Pending", "Running") for phase in phases):
        return "running", f"in-cluster Job {job}"
    if phases:
        return "unknown", f"in-cluster Job {job}, finished: `howfast fetch {job}` stores its run"
    return "gone", None


def group(objects: list[dict[str, Any]], here: liveness.Writer) -> list[RunObjects]:
    runs: dict[tuple[str, str], RunObjects] = {}
    writers: dict[tuple[str, str], str | None] = defaultdict(lambda: None)
    in_cluster: dict[tuple[str, str], list[str]] = {}  # the phases of its pod(s)
    for obj in objects:
        meta = obj.get("metadata") or {}
        token = (meta.get("labels") or {}).get(m.RUN_LABEL)
        if not token:
            continue
        key = (str(meta["namespace"]), str(token))
        run = runs.setdefault(key, RunObjects(*key))
        run.objects.append((str(obj["kind"]), str(meta["name"])))
        annotations = meta.get("annotations") or {}
        if obj["kind"] == "Secret":
            writers[key] = annotations.get(m.WRITER_ANNOTATION)
            run.target = annotations.get(m.TARGET_ANNOTATION)
        if obj["kind"] == "ConfigMap" and icm.IN_CLUSTER_ANNOTATION in annotations:
            in_cluster.setdefault(key, [])
            run.target = annotations.get(icm.TARGET_ANNOTATION)
    for obj in objects:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace")), str((meta.get("labels") or {}).get(m.RUN_LABEL)))
        if obj["kind"] == "Pod" and key in in_cluster:
            in_cluster[key].append(str((obj.get("status") or {}).get("phase")))
    for key, run in runs.items():
        if key in in_cluster:
            run.state, run.writer = in_cluster_state(key[1], in_cluster[key])
        else:
            run.state, run.writer = classify(writers[key], here)
    return sorted(runs.values(), key=lambda r: (r.namespace, r.token))


def find(cluster: Cluster, namespace: str | None) -> list[RunObjects]:
    """Every run with objects labelled by howfast (in one namespace, or all)."""
    return group(cluster.list_labelled(namespace, m.selector()), liveness.this_process())


def remove(cluster: Cluster, run: RunObjects) -> list[str]:
    """Its objects, and the cordon a drain event of it left on a node (its annotation names
    the run): the node is made schedulable again."""
    warnings = uncordon_left(cluster, run.token)
    return warnings + cluster.delete_run(run.namespace, run.token)


def uncordon_left(cluster: Cluster, token: str) -> list[str]:
    try:
        nodes = cluster.nodes()
    except HowfastError:  # no right to list nodes: then none to cordon one either
        return []
    warnings = []
    for node in nodes:
        meta = node.get("metadata") or {}
        if (meta.get("annotations") or {}).get(CORDONED_BY) != token:
            continue
        try:
            cluster.set_cordon(str(meta["name"]), False, (CORDONED_BY, token))
        except HowfastError as exc:
            warnings.append(f"node {meta['name']} stays cordoned by run {token}: {exc}")
    return warnings
