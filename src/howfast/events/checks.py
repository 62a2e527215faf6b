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
    return problems
