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


def test_a_stored_run_is_frozen_and_its_derivation_is_a_new_run(tmp_path) -> None:
    import copy

    from howfast.analysis.derive import derive_run
    from tests.unit.stored_runs import fio, init, open_temp_store, pgbench, store_run

    with open_temp_store(tmp_path) as db:
        steps = [fio("/mnt/a", "wal-fsync", sync_lat_avg_ms=2.0), init("/mnt/a", 3.0)]
        run_id = store_run(db, [*steps, pgbench("/mnt/a", 500.0)], targets=["/mnt/a"])
        run = db.get_run(run_id, with_series=True)
    assert run is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.label = "changed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.targets[0].location = "/elsewhere"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.steps[0].status = "failed"  # type: ignore[misc]
    as_read = copy.deepcopy(run)
    derived = derive_run(run)
    assert derived is not run and derived.steps[2] is not run.steps[2]
    assert derived.targets[0].derived and not run.targets[0].derived  # judged on the copy
    assert run == as_read  # what was read is left as it was
