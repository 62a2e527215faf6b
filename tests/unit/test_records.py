"""Records and outcomes are immutable: what the runner and the derivation add makes a new
object, and the one it started from is left as it was."""

from __future__ import annotations

import dataclasses

import pytest

from howfast.model import Sample
from howfast.workloads.base import OutcomeDraft, StepOutcome


def test_an_outcome_is_frozen_and_each_addition_is_a_new_outcome() -> None:
    points = (Sample(1.0, 10.0),)
    tool = StepOutcome(metrics={"tps": 10.0}, warnings=("from the tool",), series={"tps": points})
    with pytest.raises(dataclasses.FrozenInstanceError):
        tool.error = "no"  # type: ignore[misc]
    prepared = StepOutcome(warnings=("from prepare",), resolved_params={"jobs": 1, "rate": 5})
    joined = (
        tool.with_sampled(
            {"io.x": (Sample(1.0, 2.0),), "tps": ()},
            {"tps": 99.0, "cpu": 50.0, "gone": None},
            ("from a sampler",),
            {"io": {"interval_s": 1.0}},
        )
        .merged(prepared)
        .with_warning("from the runner")
        .with_resolved({"rate": 7})
        .with_error("failed")
    )
    assert joined.metrics == {"tps": 10.0, "cpu": 50.0}  # the tool's figure wins, None dropped
    assert joined.series == {"tps": points, "io.x": (Sample(1.0, 2.0),)}
    assert list(joined.series) == ["tps", "io.x"]  # the tool's first, as stored before
    assert joined.warnings == ("from prepare", "from the tool", "from a sampler", "from the runner")
    assert joined.resolved_params == {"jobs": 1, "rate": 7}
    assert joined.sections == {"io": {"interval_s": 1.0}} and joined.error == "failed"
    assert tool == StepOutcome(
        metrics={"tps": 10.0}, warnings=("from the tool",), series={"tps": points}
    )


def test_an_executor_fills_a_draft_then_freezes_it() -> None:
    draft = OutcomeDraft(warnings=["a"])
    draft.metrics["tps"] = 1.0
    draft.series["tps"] = [Sample(1.0, 1.0)]
    outcome = draft.freeze()
    draft.warnings.append("after")
    draft.series["tps"].append(Sample(2.0, 2.0))
    assert outcome.warnings == ("a",) and outcome.series == {"tps": (Sample(1.0, 1.0),)}
    assert outcome.metrics == {"tps": 1.0}
