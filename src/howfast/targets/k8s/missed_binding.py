"""A pod the scheduler set aside while its claim was unbound, and left there once it bound.

The scheduler parks such a pod until an event about its claims may change the verdict. A
loaded make test saw the claim Bound and the pod still "0/2 nodes are available: pod has
unbound immediate PersistentVolumeClaims" 120 s later: the binding's event did not move it,
and the scheduler only retries parked pods every 5 minutes. A new pod is always considered at
once, so when the contradiction lasts howfast makes its pod again: one of its own (labelled),
not on a node, so nothing ran in it. (Updating the claims would also move it, but howfast's
Role grants no patch.) The time-out's message says so if the pod still does not start.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

UNBOUND_IMMEDIATE = "unbound immediate PersistentVolumeClaims"
REMAKE_AFTER_S = 10.0  # a scheduler that is well has seen a binding within a second or two
REMAKE_EVERY_S = 20.0
MOST_REMAKES = 3


def parked_for_bound_claims(pod: Mapping[str, Any], phases: Mapping[str, str | None]) -> bool:
    """True when the scheduler's last word is that the claims are unbound while every one
    of them reads Bound (`phases`: each claim's phase, None when missing)."""
    if not phases or any(phase != "Bound" for phase in phases.values()):
        return False
    return scheduler_says_unbound(pod)


def scheduler_says_unbound(pod: Mapping[str, Any]) -> bool:
    """The pod is not on a node, and the scheduler's reason is claims not bound yet."""
    if (pod.get("spec") or {}).get("nodeName"):
        return False
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return UNBOUND_IMMEDIATE in str(condition.get("message") or "")
    return False


class MissedBinding:
    """One wait's watch for the contradiction, and the pods made again (the wait calls
    check() whenever it looks at the pod again)."""

    def __init__(
        self,
        claims: list[str],
        read_phase: Callable[[str], str | None],
        remake: Callable[[Mapping[str, Any]], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.claims = claims
        self.read_phase = read_phase
        self.remake = remake
        self.clock = clock
        self.since: float | None = None
        self.last_remake: float | None = None
        self.remakes = 0

    def check(self, pod: Mapping[str, Any] | None) -> None:
        if not self.claims or pod is None or not scheduler_says_unbound(pod):  # claims unread
            self.since = None
            return
        phases = {claim: self.read_phase(claim) for claim in self.claims}
        now = self.clock()
        if not parked_for_bound_claims(pod, phases):
            self.since = None
            return
        self.since = self.since if self.since is not None else now
        due = self.last_remake is None or now - self.last_remake >= REMAKE_EVERY_S
        if now - self.since >= REMAKE_AFTER_S and due and self.remakes < MOST_REMAKES:
            self.remakes += 1
            self.last_remake = now
            self.remake(pod)

    def said(self) -> list[str]:
        """For the time-out's message: what was tried."""
        if not self.remakes:
            return []
        return [
            f"its claims were Bound while the scheduler still called them unbound; howfast "
            f"made the pod again {self.remakes} time(s) to have it considered again"
        ]


# What the API server set on the pod it made, and must set again on the new one.
_SERVER_METADATA = (
    "uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
    "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink",
)  # fmt: skip


def remade_manifest(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod as it was created: without what the API server added (status, identity, the
    priority it computed: giving it is refused when it differs)."""
    metadata = {k: v for k, v in (pod.get("metadata") or {}).items() if k not in _SERVER_METADATA}
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k not in ("nodeName", "priority")}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
