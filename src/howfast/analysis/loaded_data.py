"""Which of a target's steps loaded the data later steps read: the workload that loads data
says so (`loads_data`, plugin/workload.py: pgbench-init), so that reading a run (pgbench's
regime warnings, the why rules) finds the latest load without naming it. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from howfast.model import StepRecord
from howfast.plugin.registry import find


def loads_data(step: StepRecord) -> bool:
    """Whether the step (re)created the tables later steps read."""
    plugin = find(step.workload)
    return plugin is not None and plugin.loads_data


def latest_load(previous: Sequence[StepRecord]) -> StepRecord | None:
    """The latest of a target's steps that loaded data, whatever became of it."""
    return next((s for s in reversed(previous) if loads_data(s)), None)
