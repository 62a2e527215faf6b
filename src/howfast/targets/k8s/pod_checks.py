"""A pod target's checks before a run: the cluster answers, the namespace, the class, the
nodes and what events will do to them (cordons), the settings the design asks for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from howfast.errors import UsageError
from howfast.machine.memory import cap_problem
from howfast.model import JSONValue
from howfast.targets.k8s import moves
from howfast.targets.k8s import network as net
from howfast.targets.k8s.cluster import Cluster
from howfast.targets.k8s.names import CORDONED_BY
from howfast.targets.k8s.pod_plan import PodPlanFacet


class PodChecksFacet(PodPlanFacet):
    """The checks before anything is created."""

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
        refusal = net.pod_security_refusal(
            self.mode, self.namespace, cluster.namespace_labels(self.namespace)
        )
        if refusal and self.server:  # a probe's pod stays off the node's network
            raise UsageError(refusal)
        if self.spec.standby_class and cluster.storage_class(self.spec.standby_class) is None:
            known = ", ".join(str(sc["metadata"]["name"]) for sc in cluster.storage_classes())
            raise UsageError(
                f"{self.name}: no StorageClass {self.spec.standby_class!r} (standby_class)",
                f"the cluster has: {known or 'none'}",
            )
        self.check_recreations(cluster)
        if self.client_mode == "pod" and self.client_node is not None:
            nodes = cluster.node_names()
            if self.client_node not in nodes:
                raise UsageError(
                    f"--client-node {self.client_node}: the cluster has no such node "
                    f"(its nodes: {', '.join(nodes)})"
                )
        self.check_design_settings()

    def check_recreations(self, cluster: Cluster) -> None:
        """What the cluster says of the events planned on the pod: nodes to move to, nodes
        to drain, a class whose volumes stay on their node."""
        moving = any(move for _, move in self.recreations)
        if not moving and not self.drains:
            return
        nodes = cluster.nodes()
        names = sorted(str(n["metadata"]["name"]) for n in nodes)
        ready = moves.schedulable(nodes)
        reasons = [
            ("a move", moves.move_refusal(node, ready, names))
            for node, move in self.recreations
            if move
        ]
        reasons += [("a drain", moves.drain_refusal(node, ready, names)) for node in self.drains]
        what = "a move" if moving else "a drain"
        for volume in (self.spec.data, self.spec.wal):
            if volume is not None and volume.storage_class is not None:
                pins = moves.class_pins(cluster.storage_class(volume.storage_class))
                reasons.append((what, pins))
        found = next(((w, r) for w, r in reasons if r is not None), None)
        if found is not None:
            raise UsageError(f"{self.name}: {found[0]} event cannot apply: {found[1]}")

    def volumes_pinned(self) -> str | None:
        if self.cluster is None or self.pod is None:
            return None
        cluster, plan = self.cluster, self.plan()
        here = str((self.pod.get("spec") or {}).get("nodeName") or "")
        volumes: dict[str, dict[str, Any]] = {}
        for claim in (c for c in (plan.data_claim, plan.wal_claim) if c):
            pvc = cluster.read("PersistentVolumeClaim", claim, self.namespace)
            name = ((pvc or {}).get("spec") or {}).get("volumeName")
            pv = cluster.read("PersistentVolume", str(name)) if name else None
            if pv is not None:
                volumes[claim] = pv
        return moves.pinned_by_volumes(volumes, cluster.nodes(), here) if volumes else None

    def cordoned(self, node: str) -> bool:
        found = self.connect().read("Node", node) or {}
        return bool((found.get("spec") or {}).get("unschedulable"))

    def uncordon(self, node: str) -> Mapping[str, JSONValue]:
        if node not in self.cordoned_nodes:
            return {"node": node, "uncordoned": False}
        self.connect().set_cordon(node, False, (CORDONED_BY, self.token))
        self.cordoned_nodes.discard(node)
        return {"node": node, "uncordoned": True}

    def check_design_settings(self) -> None:
        """Settings that would fight the standbys' design (pure: before anything exists)."""
        if not self.server or self.spec.replicas < 1:
            return
        if "synchronous_standby_names" in self.settings:
            raise UsageError(
                f"{self.name}: howfast sets synchronous_standby_names from ?replicas= and "
                "?sync=: drop --set synchronous_standby_names"
            )
        if self.spec.sync_given and "synchronous_commit" in self.settings:
            raise UsageError(
                f"{self.name}: sync={self.spec.sync} sets synchronous_commit: drop one of them"
            )
