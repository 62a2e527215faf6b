"""Whether a target can take a step's events, checked before any target starts."""

from __future__ import annotations

from collections.abc import Sequence

from howfast.events.registry import NOT_YET, actions
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
            reason = NOT_YET.get(spec.action, f"{spec.action} is not an action of this version")
        else:
            reason = action.missing(target) or action.refusal(target, spec)
        if reason is not None:
            problems.append(f"{target.name}: event {spec.text}: {reason}")
    problems += [f"{target.name}: {p}" for p in after_failover(specs)]
    return problems


# Actions that act on the server howfast started, which after a failover is dead: a restart
# would start the old primary again beside the promoted one.
ON_THE_OLD_PRIMARY = ("restart", "crash", "cap-iops", "slow-storage", "failover")


def after_failover(specs: Sequence[EventSpec]) -> list[str]:
    """A failover is the last event of a step that acts on the server: why not, per event."""
    failovers = sorted((s for s in specs if s.action == "failover"), key=lambda s: s.at_s)
    if not failovers:
        return []
    first = failovers[0]
    return [
        f"event {s.text}: after a failover the old primary is gone and no standby is left: "
        f"{s.action} cannot follow it in the same step"
        for s in specs
        if s is not first and s.action in ON_THE_OLD_PRIMARY and s.at_s >= first.at_s
    ]
