"""The run side of trials (`--trials N`, a plan's `trials`; docs/events.md "Trials: running
them"): the window of each trial, the steps they expand into (repetitions carrying `trials`,
which is no test param), what is refused, and the line each trial ends with."""

from __future__ import annotations

from pathlib import Path

import pytest

from howfast.analysis.events import EventFigures, LostCommits
from howfast.analysis.groups import matching_params
from howfast.analysis.loadrecord import Gap
from howfast.errors import PlanError, UsageError
from howfast.event_marks import EventMark
from howfast.model import StepRecord
from howfast.plans import Overrides, expand, load_plan
from howfast.plugin.events import parse_event
from howfast.plugin.trials import MAX_TRIALS, TAIL_S, check_trials, window_s
from howfast.runner.trials import figures_text, trial_line
from howfast.service.trials import refusals, refuse_without_events

STEP = (
    'steps = [{{workload = "pgbench", modes = ["tpcb-like"], clients = [1, 2], '
    'duration = "60s"{}}}]'
)


def plan(tmp_path: Path, extra: str = "", top: str = "") -> Path:
    path = tmp_path / "trials.toml"
    path.write_text(top + STEP.format(extra))
    return path


def events(*texts: str) -> tuple:
    return tuple(parse_event(t) for t in texts)


# --- the window --------------------------------------------------------------------------


def test_a_trials_window_is_the_last_event_plus_the_tail():
    assert window_s(events("4s:failover")) == 4 + TAIL_S
    assert window_s(events("3s:restart", "6.5s:failover")) == 7 + TAIL_S
    # a for= window ends later than its start: the tail counts from its end
    assert window_s(events("2s:slow-storage=5ms,for=3s")) == 5 + TAIL_S


def test_duration_sets_the_window_when_it_leaves_room_after_the_last_event():
    assert window_s(events("4s:failover"), 20.0) == 20
    with pytest.raises(UsageError, match="at least 3 s after the last event"):
        window_s(events("4s:failover"), 6.0)


def test_the_number_of_trials_is_bounded():
    assert check_trials(2) == 2
    for bad in (1, 0, -3):
        with pytest.raises(UsageError, match="2 or more"):
            check_trials(bad)
    with pytest.raises(UsageError, match=f"at most {MAX_TRIALS}"):
        check_trials(MAX_TRIALS + 1)
    with pytest.raises(UsageError, match="--repeat or --trials"):
        Overrides(trials=3, repeat=2)


# --- the steps ---------------------------------------------------------------------------


def test_each_step_with_events_becomes_its_trials_as_repetitions(tmp_path: Path):
    loaded = load_plan(str(plan(tmp_path)))
    steps = expand(loaded, Overrides(trials=3, events=events("4s:failover")))
    assert [(s.params["clients"], s.repetition) for s in steps] == [
        (1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3),
    ]  # fmt: skip
    for step in steps:
        assert step.params["trials"] == 3
        assert step.params["duration_s"] == 4 + TAIL_S  # the window, not the plan's 60 s
        assert step.params["events"] == ["4s:failover"]


def test_steps_without_events_keep_the_plans_repeat(tmp_path: Path):
    loaded = load_plan(str(plan(tmp_path, top="repeat = 2\n")))
    steps = expand(loaded, Overrides(trials=4))
    assert [s.repetition for s in steps] == [1, 2, 1, 2]
    assert all("trials" not in s.params and s.params["duration_s"] == 60 for s in steps)


def test_a_plans_trials_key_and_the_option_that_overrides_it(tmp_path: Path):
    loaded = load_plan(str(plan(tmp_path, ', events = ["5s:restart"]', top="trials = 5\n")))
    assert {s.params["trials"] for s in expand(loaded)} == {5}
    assert len(expand(loaded)) == 10
    assert len(expand(loaded, Overrides(trials=2))) == 4
    with pytest.raises(PlanError, match="trials"):
        load_plan(str(plan(tmp_path, top="trials = 1\n")))


def test_a_trial_given_in_transactions_becomes_a_window(tmp_path: Path):
    path = tmp_path / "tx.toml"
    path.write_text(
        'steps = [{workload = "pgbench", modes = ["tpcb-like"], clients = [1], '
        'transactions = 5000, events = ["4s:crash"]}]'
    )
    (first, _) = expand(load_plan(str(path)), Overrides(trials=2))
    assert "transactions" not in first.params and first.params["duration_s"] == 12


def test_trials_is_not_a_test_param_so_the_trials_are_one_test():
    one = {"mode": "tpcb-like", "clients": 4, "duration_s": 12, "events": ["4s:failover"]}
    assert matching_params("pgbench", {**one, "trials": 10, "repetition": 3}) == (
        matching_params("pgbench", one)
    )


def test_the_built_in_plan_runs_ten_failover_trials():
    steps = expand(load_plan("failover-trials"))
    trials = [s for s in steps if "trials" in s.params]
    assert len(trials) == 10
    assert trials[0].params["events"] == ["4s:failover"]
    assert trials[0].params["duration_s"] == 12
    assert [s.repetition for s in trials] == list(range(1, 11))


# --- refusals ----------------------------------------------------------------------------


def test_trials_without_events_are_refused_with_what_to_give(tmp_path: Path):
    steps = expand(load_plan(str(plan(tmp_path))), Overrides(trials=3))
    with pytest.raises(UsageError) as caught:
        refuse_without_events((3, "--trials 3"), "mine", steps)
    assert "--trials 3" in caught.value.message and "has events" in caught.value.message
    assert "--event" in (caught.value.hint or "")


def test_a_failover_with_an_action_on_the_first_primary_cannot_be_trials(tmp_path: Path):
    loaded = load_plan(str(plan(tmp_path)))
    mixed = expand(loaded, Overrides(trials=2, events=events("3s:crash", "8s:failover")))
    (problem,) = refusals([], mixed)
    assert "3s:crash" in problem and "promoted standby" in problem
    alone = expand(loaded, Overrides(trials=2, events=events("3s:failover")))
    assert refusals([], alone) == []
    # the same events without trials: the events' own checks decide
    assert refusals([], expand(loaded, Overrides(events=events("3s:crash", "8s:failover")))) == []


def test_move_and_drain_say_why_their_trials_would_differ():
    from howfast.events.registry import actions

    known = actions()
    for name in ("move", "drain"):
        assert "same state" in (known[name].trials_refusal or "")
    for name in ("failover", "restart", "crash", "delete-pod", "checkpoint"):
        assert known[name].trials_refusal is None


# --- the line each trial ends with ---------------------------------------------------------


def _figure(lost: int, most: int, down: float = 0.9, applied: bool = True) -> EventFigures:
    mark = EventMark(1, "4s:failover", "failover", 4.0, applied_s=4.01 if applied else None)
    counted = LostCommits((None, 4.5), acked=100, rows=100 - lost, in_doubt=most - lost)
    return EventFigures(
        mark,
        gap=Gap(4.0, 4.0 + down) if applied else None,
        downtime_s=down if applied else None,
        lost=counted if applied else None,
        lost_note=None if applied else "not applied",
    )


def test_the_trial_line_says_the_outage_and_the_commits_lost():
    assert figures_text([_figure(0, 0)]) == "0.9 s down, 0 lost"
    assert figures_text([_figure(2, 2, down=1.23)]) == "1.2 s down, 2 lost"
    assert figures_text([_figure(0, 1)]) == "0.9 s down, 0 lost (1 in doubt)"
    assert figures_text([_figure(0, 0, applied=False)]) == "failover not applied"


def test_a_step_that_is_no_trial_has_no_line_and_a_failed_trial_says_why():
    params = {"mode": "tpcb-like", "clients": 4, "duration_s": 12}
    record = StepRecord("t", "pgbench", params, "completed", "2026-01-01", "2026-01-01")
    assert trial_line(record) is None
    failed = StepRecord(
        "t",
        "pgbench",
        {**params, "trials": 20, "repetition": 7},
        "failed",
        "2026-01-01",
        "2026-01-01",
        error="pgbench: error: connection refused\nmore",
    )
    assert trial_line(failed) == "trial 7/20: failed: pgbench: error: connection refused"
