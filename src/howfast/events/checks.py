"""Whether a target can take a step's events, checked before any target starts: from what
each action declares (events/base.py), no list of actions here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from howfast.events.base import EventAction
from howfast.events.registry import actions
from howfast.eventspec import EventSpec
from howfast.targets.base import Target


def refusals(target: Target, specs: Sequence[EventSpec]) -> list[str]:
    """One sentence per event the target cannot take, naming the target; [] when it can
    take them all."""
    known = actions()
    problems = []
    for spec in specs:
        action = known.get(spec.action)
        reason: str | None
        if action is None:
            reason = f"{spec.action} is not an action of this version"
        else:
            reason = action.missing(target) or action.refusal(target, spec)
        if reason is not None:
            problems.append(f"{target.name}: event {spec.text}: {reason}")
    problems += [f"{target.name}: {p}" for p in after_failover(specs, known)]
    return problems


def after_failover(
    specs: Sequence[EventSpec], known: Mapping[str, EventAction] | None = None
) -> list[str]:
    """A failover (an action that `replaces_primary`) is the last event of a step that acts
    on the server (`on_old_primary`: a restart would start the old primary again beside the
    promoted one): why not, per event."""
    known = actions() if known is None else known

    def declares(spec: EventSpec, flag: str) -> bool:
        action = known.get(spec.action)
        return action is not None and bool(getattr(action, flag))

    failovers = sorted((s for s in specs if declares(s, "replaces_primary")), key=lambda s: s.at_s)
    if not failovers:
        return []
    first = failovers[0]
    return [
        f"event {s.text}: after a failover the old primary is gone and no standby is left: "
        f"{s.action} cannot follow it in the same step"
        for s in specs
        if s is not first and declares(s, "on_old_primary") and s.at_s >= first.at_s
    ]
