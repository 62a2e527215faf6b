"""Requests to the CloudNativePG operator, as its kubectl plugin makes them (v1.27.1,
internal/cmd/plugin/promote and restart), built as the merge patches howfast sends. Pure.

- promote (`kubectl cnpg promote CLUSTER INSTANCE`): the Cluster's status subresource gets
  targetPrimary = INSTANCE, targetPrimaryTimestamp = now, phase "Switchover in progress"
  and its reason, and the Ready condition set from the phase; the operator then shuts the
  primary down, promotes INSTANCE, and moves the -rw Service.
- restart of the primary (`kubectl cnpg restart CLUSTER PRIMARY`): phase "Primary instance
  is being restarted in-place", reason "Requested by the user"; the operator restarts it.
Both carry the object's resourceVersion: the API refuses the patch if the Cluster changed
since it was read (the plugin's optimistic lock), and howfast reads and tries again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from howfast.targets.cnpg.discovery import HEALTHY_PHASE, ClusterLayout

SWITCHOVER_PHASE = "Switchover in progress"
FAILOVER_PHASE = "Failing over"
INPLACE_RESTART_PHASE = "Primary instance is being restarted in-place"
READY_CONDITION = "Ready"


def ready_condition(
    conditions: Sequence[Mapping[str, Any]], phase: str, now: str
) -> list[dict[str, Any]]:
    """The conditions with Ready set from `phase` (True only when healthy), the others kept;
    its lastTransitionTime changes only when its status does (as meta.SetStatusCondition)."""
    healthy = phase == HEALTHY_PHASE
    wanted = {
        "type": READY_CONDITION,
        "status": "True" if healthy else "False",
        "reason": "ClusterIsReady" if healthy else "ClusterIsNotReady",
        "message": "Cluster is Ready" if healthy else "Cluster Is Not Ready",
    }
    out: list[dict[str, Any]] = []
    found = False
    for condition in conditions:
        if condition.get("type") != READY_CONDITION:
            out.append(dict(condition))
            continue
        found = True
        same = condition.get("status") == wanted["status"]
        when = condition.get("lastTransitionTime") if same else now
        out.append({**condition, **wanted, "lastTransitionTime": when or now})
    if not found:
        out.append({**wanted, "lastTransitionTime": now})
    return out


def _resource_version(cluster: Mapping[str, Any]) -> str:
    version = (cluster.get("metadata") or {}).get("resourceVersion")
    if not version:
        raise ValueError("the Cluster object has no resourceVersion: read it from the API")
    return str(version)


def promote_refusal(layout: ClusterLayout, instance: str) -> str | None:
    """Why `instance` cannot be promoted now; None when it can."""
    if layout.instance(instance) is None:
        names = ", ".join(i.name for i in layout.standbys()) or "none"
        return f"{instance} is not an instance of Cluster {layout.name} (its standbys: {names})"
    if instance == layout.current_primary:
        return f"{instance} is already the primary of Cluster {layout.name}"
    if layout.target_primary and layout.target_primary != layout.current_primary:
        return f"Cluster {layout.name} is already changing its primary ({layout.phase})"
    return None


def promote_patch(cluster: Mapping[str, Any], instance: str, now: str) -> dict[str, Any]:
    """The status patch of `kubectl cnpg promote CLUSTER INSTANCE` (`now`: RFC 3339 with
    microseconds, the operator's own format)."""
    conditions = (cluster.get("status") or {}).get("conditions") or []
    return {
        "metadata": {"resourceVersion": _resource_version(cluster)},
        "status": {
            "targetPrimary": instance,
            "targetPrimaryTimestamp": now,
            "phase": SWITCHOVER_PHASE,
            "phaseReason": f"Switching over to {instance}",
            "conditions": ready_condition(conditions, SWITCHOVER_PHASE, now),
        },
    }


def restart_primary_patch(cluster: Mapping[str, Any], now: str) -> dict[str, Any]:
    """The status patch of `kubectl cnpg restart CLUSTER PRIMARY`: an in-place restart."""
    conditions = (cluster.get("status") or {}).get("conditions") or []
    return {
        "metadata": {"resourceVersion": _resource_version(cluster)},
        "status": {
            "phase": INPLACE_RESTART_PHASE,
            "phaseReason": "Requested by the user",
            "conditions": ready_condition(conditions, INPLACE_RESTART_PHASE, now),
        },
    }


def operator_time(epoch_s: float) -> str:
    """An instant as the operator writes its status timestamps (pgTime: RFC 3339, UTC,
    microseconds)."""
    import datetime as dt

    return dt.datetime.fromtimestamp(epoch_s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def most_advanced_standby(layout: ClusterLayout, lag_bytes: Mapping[str, int | None]) -> str | None:
    """The Ready standby the primary had flushed furthest (least lag): a switchover's
    choice; by name among equals; None without a Ready standby."""
    ready = [i for i in layout.standbys() if i.ready]
    if not ready:
        return None

    def behind(name: str) -> int:
        lag = lag_bytes.get(name)
        return lag if lag is not None else 2**62

    return min(ready, key=lambda i: (behind(i.name), i.name)).name
