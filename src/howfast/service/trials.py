"""What `--trials N` (or a plan's `trials`) refuses before anything is created: trials repeat
a step's events, each trial starting from the same state (plugin/trials.py, docs/events.md).
A run without events, an `--until` run, and events whose state howfast does not put back
between trials are refused by name (exit 2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from howfast.errors import UsageError
from howfast.model import JSONValue, StepSpec
from howfast.targets.base import Target
from howfast.targets.capabilities import Promotable, StorageSlowable

if TYPE_CHECKING:
    from howfast.events.base import EventAction
    from howfast.eventspec import EventSpec


# The event actions, and all they use, are imported only for a run that asks for trials.
def _actions() -> Mapping[str, EventAction]:
    from howfast.events.registry import actions

    return actions()


def _step_events(params: Mapping[str, JSONValue]) -> tuple[EventSpec, ...]:
    from howfast.events.step import step_events

    return step_events(params)


def asked_trials(option: int | None, plan_trials: int | None) -> tuple[int, str] | None:
    """How many trials were asked and by what (for messages); None: no trials."""
    if option is not None:
        return option, f"--trials {option}"
    if plan_trials is not None:
        return plan_trials, f"the plan's trials = {plan_trials}"
    return None


def refuse_with_until(asked: tuple[int, str] | None, until: bool) -> None:
    if asked is not None and until:
        raise UsageError(
            f"{asked[1]} cannot be combined with --until (or the plan's until): trials are "
            "a fixed number of windows of load, each with its events, not repetitions until "
            "a figure is steady"
        )


def refuse_without_events(
    asked: tuple[int, str] | None, plan_name: str, steps: Sequence[StepSpec]
) -> None:
    """Trials of nothing: no step has events."""
    if asked is None or any("trials" in s.params for s in steps):
        return
    raise UsageError(
        f"{asked[1]}: no pgbench step of plan {plan_name!r} has events, and a trial repeats "
        "a step's events",
        "give one or more --event AT:ACTION (e.g. --event 5s:failover), or the built-in plan "
        "failover-trials",
    )


def refusals(targets: Sequence[Target], steps: Sequence[StepSpec]) -> list[str]:
    """Why a step's events cannot be run as trials on these targets, one sentence each:
    an action that leaves the server where howfast does not put it back from (a pod on
    another node), or one that acts only on the primary howfast started beside a failover,
    whose rebuild leaves a promoted standby as the primary of the next trials."""
    trial_steps = [s for s in steps if "trials" in s.params]
    if not trial_steps:
        return []
    known = _actions()
    problems: list[str] = []
    for step in trial_steps:
        specs = _step_events(step.params)
        failover = next(
            (s for s in specs if s.action in known and known[s.action].replaces_primary), None
        )
        for spec in specs:
            action = known.get(spec.action)
            if action is None:
                continue  # the events' own checks name it
            if action.trials_refusal is not None:
                problems += [
                    f"{t.name}: event {spec.text} with --trials: {action.trials_refusal}"
                    for t in targets
                ]
            if failover is not None and not action.acts_on_promoted:
                problems.append(
                    f"event {spec.text} with {failover.text} and --trials: after the first "
                    f"trial's failover the primary is the promoted standby (the design is "
                    f"rebuilt around it), and {spec.action} acts only on the primary howfast "
                    "started; run them as separate steps or runs"
                )
    return list(dict.fromkeys(problems))


def uneven_first_trial(
    targets: Sequence[Target], steps: Sequence[StepSpec], standby_latency_ms: float | None
) -> list[str]:
    """Warnings for failover trials whose first trial would run on other storage than the
    next ones: a primary in a plain directory with its standby on an emulated volume
    (--standby-latency). After a failover the promoted standby, on its volume (given the
    primary's added latency, 0 ms), is the primary of the next trials."""
    if standby_latency_ms is None:
        return []
    trial_steps = [s for s in steps if "trials" in s.params]
    if not trial_steps:
        return []
    known = _actions()
    failover_trials = any(
        e.action in known and known[e.action].replaces_primary
        for s in trial_steps
        for e in _step_events(s.params)
    )
    if not failover_trials:
        return []
    return [
        f"warning: {t.name}: after the first trial's failover the primary runs on the promoted "
        "standby's emulated volume (at +0 ms), the first trial in the directory itself: give "
        "--storage-latency 0ms to put the primary on an emulated volume from the start, and "
        "every trial on the same storage"
        for t in targets
        if isinstance(t, Promotable) and not isinstance(t, StorageSlowable)
    ]
