"""Progress of a run on stderr: a live bar with step, ETA and TPS on a terminal, one line per
step otherwise (CI logs, pipes)."""

from __future__ import annotations

import time

from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from howfast.analysis.events import event_line, step_figures
from howfast.cli.context import CliEnv
from howfast.errortext import error_cause
from howfast.model import StepRecord
from howfast.observer import StepRef
from howfast.plugin.registry import find

UNKNOWN_STEP_S = 5.0


def step_summary(record: StepRecord) -> str:
    """The end of a step's progress line: its status, and for a completed step what its
    workload says of it (`progress_summary`: pgbench's TPS and latencies, fio's IOPS)."""
    if record.status != "completed":
        first = (record.error or "").splitlines()[0] if record.error else ""
        cause = "".join(f"\n        {line}" for line in error_cause(record.error))
        return f"{record.status}: {first}{cause}"
    plugin = find(record.workload)
    parts = plugin.progress_summary(record.metrics) if plugin is not None else []
    return "completed" + (": " + ", ".join(parts) if parts else "")


def event_lines(record: StepRecord) -> list[str]:
    """Each event's figures as recorded and as `results show` prints them ('restart at 2 s:
    0.50 s without service, ...'): the live view's only figures of an event's cost."""
    if "events" not in record.sections:
        return []
    return [event_line(fig) for fig in step_figures(record.sections, record.histograms)]


class EtaColumn(ProgressColumn):
    """Time left from the planned step durations, not from a speed estimate: a run's steps
    have known lengths, so the ETA is right from the first second."""

    def __init__(self, observer: ProgressObserver) -> None:
        super().__init__()
        self.observer = observer

    def render(self, task: Task) -> Text:
        remaining = self.observer.remaining_s()
        minutes, seconds = divmod(int(remaining + 0.5), 60)
        return Text(f"ETA {minutes // 60}:{minutes % 60:02d}:{seconds:02d}", style="cyan")


class ProgressObserver:
    def __init__(self, env: CliEnv, expected_total_s: float | None = None) -> None:
        self.env = env
        self.expected_total_s = expected_total_s
        self.total_steps = 0
        self.done_s = 0.0
        self.current_expected = UNKNOWN_STEP_S
        self.step_started_at = 0.0
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        self.label = ""

    def run_started(self, run_id: int, steps: int, targets: int) -> None:
        self.total_steps = steps
        self.env.info(f"run {run_id}: {steps} steps on {targets} target(s)")
        if self.env.interactive:
            self.progress = Progress(
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                TextColumn("{task.fields[live]}", markup=False),
                TimeElapsedColumn(),
                EtaColumn(self),
                console=self.env.err,
                transient=True,
                # its figures change once a second; rich's default of 10 redraws a second
                # cost 1.5% of a core beside the measuring pgbench (benchmarks/controller)
                refresh_per_second=1,
            )
            self.progress.start()
            self.task = self.progress.add_task(
                "starting", total=self.expected_total_s or steps * UNKNOWN_STEP_S, live=""
            )

    def remaining_s(self) -> float:
        total = self.expected_total_s or self.total_steps * UNKNOWN_STEP_S
        in_step = min(time.monotonic() - self.step_started_at, self.current_expected)
        if not self.step_started_at:
            in_step = 0.0
        return max(0.0, total - self.done_s - in_step)

    def step_started(self, step: StepRef, expected_s: float | None) -> None:
        self.current_expected = expected_s or UNKNOWN_STEP_S
        self.step_started_at = time.monotonic()
        self.label = f"[{step.index + 1}/{step.total}] {step.label}"
        if self.progress and self.task is not None:
            self.progress.update(self.task, description=self.label, live="")
        else:
            self.env.info(f"{self.label} on {step.target}")

    def step_progress(self, step: StepRef, t: float, values: dict[str, float]) -> None:
        if not (self.progress and self.task is not None):
            return
        live = f"{values['tps']:,.0f} tps" if "tps" in values else ""
        if "latency_ms" in values:
            live += f" {values['latency_ms']:.2f} ms"
        self.progress.update(
            self.task, completed=self.done_s + min(t, self.current_expected), live=live
        )

    def step_finished(self, step: StepRef, record: StepRecord) -> None:
        self.done_s += self.current_expected
        summary = step_summary(record)
        if self.progress and self.task is not None:
            self.progress.update(self.task, completed=self.done_s)
            self.progress.console.print(f"{self.label}: {summary}", markup=False)
        else:
            self.env.info(f"    {summary}")
        for warning in record.warnings:
            self.message(f"    warning: {warning}")
        for line in event_lines(record):
            self.message(f"    event: {line}")

    def message(self, text: str) -> None:
        if self.progress:
            self.progress.console.print(text, markup=False)
        else:
            self.env.info(text)

    def close(self) -> None:
        if self.progress:
            self.progress.stop()
            self.progress = None
