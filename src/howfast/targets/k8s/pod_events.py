"""What pod events do to a k8s target's server pod (issue 29): a node drained (cordoned,
the pod evicted and made again elsewhere), the pod deleted or moved and made again on its
volumes. Its plan_* methods say, before the first step, why an event cannot apply."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping

from howfast.cancel import NEVER, CancelToken
from howfast.errors import HowfastError
from howfast.model import JSONValue
from howfast.targets import pgquery
from howfast.targets.capabilities import Drainable, PodRecreatable, ServerIdentity
from howfast.targets.k8s import moves
from howfast.targets.k8s.names import CORDONED_BY
from howfast.targets.k8s.pod_lifecycle import PodLifecycleFacet

POD_GRACE_S = 30  # the server pod's terminationGracePeriodSeconds (manifests.py)


class PodEventsFacet(PodLifecycleFacet, PodRecreatable, Drainable):
    """The drain and recreation capabilities, on the pod and its node."""

    # -- a node drained (issue 29: drain=NODE) -------------------------------------------
    def plan_drain(self, node: str) -> str | None:
        reason = moves.spec_pins(self.spec)
        if reason is None and not self.node_changes_allowed:
            reason = (
                f"drain cordons node {node} for the cluster's other users too (howfast did not "
                "create it): add --yes"
            )
        if reason is None and self.client_mode == "same-pod":
            reason = (
                "the load runs in the server's pod (--client same-pod), which the drain "
                "evicts: give --client pod (the default)"
            )
        if reason is None and self.client_node == node:
            reason = f"the client pod is pinned to {node} (--client-node), which the drain empties"
        if reason is None and node not in self.drains:  # each step with events asks
            self.drains.append(node)
        return reason

    def drain(self, node: str, cancel: CancelToken = NEVER) -> Mapping[str, JSONValue]:
        cluster, _, _ = self.exec_place()
        if node not in self.cordoned_nodes and not self.cordoned(node):
            with self._objects:  # stop() uncordons what it finds here
                if not self._started:
                    raise HowfastError(f"{self.name}: stopping: node {node} is not cordoned")
                cluster.set_cordon(node, True, (CORDONED_BY, self.token))
                self.cordoned_nodes.add(node)
            facts: dict[str, JSONValue] = {"node": node, "cordoned": True}
        else:
            facts = {"node": node, "cordoned": False, "note": f"{node} was cordoned already"}
        here = str(((self.pod or {}).get("spec") or {}).get("nodeName") or "")
        if here != node:
            return {**facts, "evicted": [], "server_node": here}
        try:
            destination = moves.destination(None, self.schedulable_nodes(), here)
        except ValueError as exc:
            raise HowfastError(f"drain {node}: {exc}") from None
        remade = self._remake_pod(destination, cancel, evict=True)
        return {**facts, "evicted": [str(remade["pod"])], **remade}

    # -- the server's pod made again (issue 29: delete-pod, move) ------------------------
    def plan_recreation(self, node: str | None, *, move: bool) -> str | None:
        reason = moves.spec_pins(self.spec)
        if reason is None and self.client_mode == "same-pod":
            reason = (
                "the load runs in the server's pod (--client same-pod), which the event "
                "deletes: give --client pod (the default)"
            )
        if reason is None and move and node is not None and node == self.options.node:
            reason = f"the server's pod runs on {node} already (--node {node})"
        if reason is None and (node, move) not in self.recreations:  # each step asks
            self.recreations.append((node, move))
        return reason

    def schedulable_nodes(self) -> list[str]:
        return moves.schedulable(self.connect().nodes())

    def pod_identity(self) -> ServerIdentity:
        cluster, namespace, name = self.exec_place()
        pod = cluster.read("Pod", name, namespace) or {}
        started: str | None = None
        if self.connection is not None:
            with contextlib.suppress(HowfastError):
                started = pgquery.postmaster_start_time(self.connection)
        return ServerIdentity(
            pid=None,
            started_at=started,
            node=(pod.get("spec") or {}).get("nodeName"),
            pod_uid=(pod.get("metadata") or {}).get("uid"),
        )

    def recreate_pod(
        self, node: str | None, cancel: CancelToken = NEVER
    ) -> Mapping[str, JSONValue]:
        return self._remake_pod(node, cancel, evict=False)

    def _remake_pod(
        self, node: str | None, cancel: CancelToken, *, evict: bool
    ) -> dict[str, JSONValue]:
        """Delete (or evict, as a drain does) the server's pod, and make it again."""
        cluster, namespace, name = self.exec_place()
        if self.pod_manifest is None or self.pod is None:
            raise HowfastError(f"{self.name}: the server's pod is not running")
        uid = str(self.pod["metadata"]["uid"])
        node_before = (self.pod.get("spec") or {}).get("nodeName")
        began = time.monotonic()
        # The pod's grace period: the start script's trap shuts the server down (fast)
        if evict:
            cluster.evict(name, namespace, POD_GRACE_S)
        else:
            cluster.delete("Pod", name, namespace, grace_s=POD_GRACE_S)
        if not cluster.wait_pod_gone(namespace, name, uid, POD_GRACE_S + 60, cancel):
            raise HowfastError(f"pod {name} was still there {POD_GRACE_S + 60} s after deletion")
        gone = time.monotonic()
        self._api.shells.close(name)  # their sessions ended with the pod
        with self._objects:
            if not self._started:
                raise HowfastError(f"{self.name}: stopping: the pod is not made again")
            cluster.create(moves.pod_on(self.pod_manifest, node))
        plan = self.plan()
        claims = [c for c in (plan.data_claim, plan.wal_claim) if c]
        self.pod = cluster.wait_pod_ready(
            namespace, name, claims, self.options.start_timeout_s, cancel
        )
        node_after = (self.pod.get("spec") or {}).get("nodeName")
        self.node = cluster.read("Node", str(node_after)) if node_after else None
        self._host = None  # its description names the node
        self._wait_sql(60.0)
        return {
            "pod": name,
            "pod_uid_before": uid,
            "pod_uid_after": str(self.pod["metadata"]["uid"]),
            "node_before": node_before,
            "node_after": node_after,
            "node_asked": node,
            "deleted_s": round(gone - began, 3),
            "ready_s": round(time.monotonic() - began, 3),
        }
