"""The events of one step, as the run service checks them and the runner schedules them:
from the step's params (`params["events"]`: the events' canonical texts, docs/events.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from howfast.cancel import CancelToken
from howfast.event_marks import EventMark
from howfast.events import checks
from howfast.events.base import EventContext
from howfast.events.registry import actions
from howfast.events.schedule import EventSchedule
from howfast.eventspec import EventSpec, step_refusals
from howfast.model import JSONValue, StepSpec
from howfast.plans.model import MAX_ADDED_LATENCY_MS
from howfast.plugin.events import event_from_text
from howfast.targets.base import Connection, Target


def step_events(params: Mapping[str, JSONValue]) -> tuple[EventSpec, ...]:
    """The events a step's params ask for; () for a step without."""
    texts = params.get("events")
    if not isinstance(texts, list):
        return ()
    return tuple(event_from_text(str(t)) for t in texts)


def _number(value: JSONValue) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def refusals(targets: Sequence[Target], steps: Sequence[StepSpec]) -> list[str]:
    """Why the run cannot apply its steps' events, one sentence each (no repeats): a step
    they do not fit (its length, transactions), a target that cannot take one. [] when
    everything can run."""
    problems: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for step in steps:
        specs = step_events(step.params)
        if not specs:
            continue
        key = (
            str(step.params.get("duration_s")),
            str(step.params.get("transactions")),
            *(s.text for s in specs),
        )
        if key in seen:
            continue
        seen.add(key)
        transactions = step.params.get("transactions")
        problems += step_refusals(
            specs,
            duration_s=_number(step.params.get("duration_s")),
            transactions=int(transactions) if isinstance(transactions, int) else None,
            max_added_latency_ms=MAX_ADDED_LATENCY_MS,
        )
        for target in targets:
            problems += checks.refusals(target, specs)
    return list(dict.fromkeys(problems))


def schedule_for(
    target: Target,
    params: Mapping[str, JSONValue],
    primary: Callable[[], Connection],
    scratch: Path,
    cancel: CancelToken,
    observer: Callable[[EventMark], None],
) -> EventSchedule | None:
    """The schedule of a step's events on this target; None for a step without events."""
    specs = step_events(params)
    if not specs:
        return None
    load_s = _number(params.get("duration_s")) or 0.0
    return EventSchedule(
        lambda now: EventContext(target, now, primary, scratch, load_s, cancel),
        specs,
        actions(),
        observer=observer,
    )
