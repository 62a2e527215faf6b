"""What the runner tells the user interface, with which target and which step each event is
about, so that several target sessions could report side by side."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from howfast.model import JSONValue, StepRecord

# What a step whose workload declares no duration is expected to take: the run's ETA
# (service/run.py) and the progress bar's share of the step.
UNKNOWN_STEP_S = 5.0


@dataclass(frozen=True)
class StepRef:
    """Which step an event is about: its place in the run and its target."""

    index: int  # 0-based, over the whole run
    total: int  # steps in the whole run
    target: str  # the target's name
    label: str  # the workload's description of the step
    workload: str = ""  # the workload's name (pgbench, fio...)
    params: Mapping[str, JSONValue] = field(default_factory=dict, compare=False)  # as planned


class RunObserver(Protocol):
    """The CLI draws progress from these calls."""

    def run_started(self, run_id: int, steps: int, targets: int) -> None: ...
    def step_started(self, step: StepRef, expected_s: float | None) -> None: ...
    def step_progress(self, step: StepRef, t: float, values: dict[str, float]) -> None: ...
    def step_finished(self, step: StepRef, record: StepRecord) -> None: ...
    def message(self, text: str) -> None: ...
