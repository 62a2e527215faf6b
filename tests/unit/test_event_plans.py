"""Events in plans and on the command line: a pgbench step's `events` and `segment` keys,
`--event` replacing them, and what makes an event step its own test."""

from __future__ import annotations

from pathlib import Path

import pytest

from howfast.analysis.groups import matching_params
from howfast.errors import PlanError, UsageError
from howfast.plans import Overrides, expand, load_plan
from howfast.plugin.events import parse_event

STEP = (
    'steps = [{{workload = "pgbench", modes = ["tpcb-like"], clients = [1], duration = "20s"{}}}]'
)


def plan(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "events.toml"
    path.write_text(STEP.format(extra))
    return path


def test_a_steps_events_are_kept_as_their_canonical_texts_with_the_segment(tmp_path: Path):
    path = plan(
        tmp_path,
        ', events = ["1m:restart", {at = "5s", exec = ["touch", "/tmp/a b"]}], segment = 4',
    )
    (step,) = expand(load_plan(str(path)))
    assert step.params["events"] == ["60s:restart", "5s:exec=touch '/tmp/a b'"]
    assert step.params["segment"] == 4


def test_the_command_lines_events_replace_the_plans(tmp_path: Path):
    path = plan(tmp_path, ', events = ["5s:restart"]')
    (step,) = expand(load_plan(str(path)), Overrides(events=(parse_event("3s:crash"),)))
    assert step.params["events"] == ["3s:crash"]
    (quiet,) = expand(load_plan(str(plan(tmp_path, ""))))
    assert "events" not in quiet.params and "segment" not in quiet.params


def test_a_bad_event_in_a_plan_names_the_key_and_what_is_accepted(tmp_path: Path):
    with pytest.raises(PlanError) as caught:
        load_plan(str(plan(tmp_path, ', events = ["5s:restrat"]')))
    text = str(caught.value)
    assert "events" in text and "restrat" in text and "checkpoint" in text


def test_segment_without_events_is_refused(tmp_path: Path):
    with pytest.raises(PlanError, match="segment applies to steps with events only"):
        load_plan(str(plan(tmp_path, ", segment = 4")))


def test_the_option_refuses_a_mistake_with_the_grammar():
    with pytest.raises(UsageError) as caught:
        parse_event("5s:restrat")
    assert "--event" in caught.value.message


def test_an_event_step_is_never_the_same_test_as_a_quiet_one():
    quiet = {"mode": "tpcb-like", "clients": 2, "duration_s": 20}
    loud = {**quiet, "events": ["5s:restart"]}
    assert matching_params("pgbench", quiet) != matching_params("pgbench", loud)
    assert matching_params("pgbench", loud)["events"] == ["5s:restart"]
