"""(issue 37) Actions an operator does on the targets it runs (`cnpg://`, OperatorManaged):
delete-pod, failover, switchover and restart are requests to the operator there, which
decides the outage. `OperatorAware` is the base of those actions: on such a target it asks
the target (targets/cnpg/ops.py) and verifies what came back (`verdict`, pure); elsewhere
it does the action's own (`own_refusal`, `own_apply`, `own_verify`).

What is stored beside the event's figures: the old and new primary, the operator's
timeline (when its status said the primary failed, which instance it chose, when it was
promoted, when the -rw Service pointed at it, when the cluster was healthy again) and the
Cluster's events."""

from __future__ import annotations

from collections.abc import Mapping

from howfast.events.base import Applied, EventAction, EventContext, Verified
from howfast.eventspec import EventSpec
from howfast.model import JSONValue
from howfast.targets.base import Target
from howfast.targets.capabilities import OperatorManaged

EVIDENCE_KEYS = (
    "old_primary",
    "new_primary",
    "asked_primary",
    "serves",
    "in_recovery_after",
    "timeline_before",
    "timeline_after",
    "restarted",
    "through",
    "timeline",  # the operator's (targets/cnpg/timeline.py): in the event's document
    "operator_events",
)


def verdict(action: str, facts: Mapping[str, JSONValue]) -> str | None:
    """Why the operator's event did not happen as asked; None when it did: a primary
    serves, out of recovery; after restart it is a new postmaster; after the others another
    instance, the one asked if one was, on a later timeline when both were read."""
    if not facts.get("serves"):
        return "no primary served again while the operator was watched"
    if facts.get("in_recovery_after"):
        return "the primary that answered is still in recovery"
    new, old = facts.get("new_primary"), facts.get("old_primary")
    if action == "restart":
        if facts.get("restarted") is False:
            return f"{old}'s server was not restarted (its start time did not change)"
        return None
    if new == old:
        return f"the primary is still {old}"
    asked = facts.get("asked_primary")
    if asked is not None and new != asked:
        return f"the operator promoted {new}, not {asked}"
    before, after = facts.get("timeline_before"), facts.get("timeline_after")
    if isinstance(before, int) and isinstance(after, int) and after <= before:
        return f"the timeline did not grow ({before} → {after})"
    return None


class OperatorAware(EventAction):
    """An action that an operator does on the targets it runs (OperatorManaged)."""

    def missing(self, target: Target) -> str | None:
        if isinstance(target, OperatorManaged):
            return None
        return super().missing(target)

    def refusal(self, target: Target, spec: EventSpec) -> str | None:
        if isinstance(target, OperatorManaged):
            return target.operator_refusal(self.name, spec.arg)
        return self.own_refusal(target, spec)

    def apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        target = ctx.target
        if not isinstance(target, OperatorManaged):
            return self.own_apply(ctx, spec)
        applied = ctx.now()
        facts = dict(target.operator_event(self.name, spec.arg, ctx.now))
        back = facts.get("back_s")
        return Applied(applied, float(back) if isinstance(back, int | float) else None, facts)

    def verify(self, ctx: EventContext, spec: EventSpec, applied: Applied) -> Verified:
        if not isinstance(ctx.target, OperatorManaged):
            return self.own_verify(ctx, spec, applied)
        evidence = {key: applied.facts.get(key) for key in EVIDENCE_KEYS}
        problem = verdict(self.name, applied.facts)
        return Verified(problem is None, evidence, problem)

    def own_refusal(self, target: Target, spec: EventSpec) -> str | None:
        return None

    def own_apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        raise NotImplementedError(f"{self.name} is done by an operator only")

    def own_verify(self, ctx: EventContext, spec: EventSpec, applied: Applied) -> Verified:
        raise NotImplementedError(f"{self.name} is done by an operator only")
