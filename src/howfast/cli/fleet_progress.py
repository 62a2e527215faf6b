"""Progress of a fleet run: per class, how many instances run the step and their live total
TPS; a summary line per class when the step ends on every instance; on a terminal, the time
left by the run's ETA. Events come from many threads at once (each instance's pgbench), hence
the lock."""

from __future__ import annotations

import statistics
import threading
import time
from collections import defaultdict

from rich.progress import Progress, ProgressColumn, Task, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

from howfast.cli.context import CliEnv
from howfast.errortext import error_cause
from howfast.model import StepRecord
from howfast.observer import StepRef


def class_of(step: StepRef) -> str:
    klass = step.params.get("class")
    return str(klass) if klass is not None else step.target


class EtaColumn(ProgressColumn):
    """Time left of the run by its planned duration (PreparedRun.expected_s): the fleet's
    instances run side by side, so it counts its scenarios' steps, not its instances'."""

    def __init__(self, observer: FleetProgressObserver) -> None:
        super().__init__()
        self.observer = observer

    def render(self, task: Task) -> Text:
        minutes, seconds = divmod(int(self.observer.remaining_s() + 0.5), 60)
        return Text(f"ETA {minutes // 60}:{minutes % 60:02d}:{seconds:02d}", style="cyan")


class FleetProgressObserver:
    def __init__(self, env: CliEnv, expected_total_s: float | None = None) -> None:
        self.env = env
        self.expected_total_s = expected_total_s
        self.started_at = 0.0
        self.lock = threading.Lock()
        self.total_steps = 0
        self.tps: dict[str, dict[str, float]] = defaultdict(dict)  # class -> instance -> tps
        self.finished: dict[str, list[StepRecord]] = defaultdict(list)
        self.running: dict[str, int] = defaultdict(int)  # class -> instances in this step
        self.done = 0  # instance-steps finished
        self.label = ""
        self.progress: Progress | None = None
        self.tasks: dict[str, TaskID] = {}

    def remaining_s(self) -> float:
        if not self.expected_total_s or not self.started_at:
            return 0.0
        return max(0.0, self.expected_total_s - (time.monotonic() - self.started_at))

    def run_started(self, run_id: int, steps: int, targets: int) -> None:
        self.total_steps = steps
        self.started_at = time.monotonic()
        self.env.info(f"run {run_id}: a fleet of {targets} instances, {steps} steps in all")
        if self.env.interactive:
            eta = [EtaColumn(self)] if self.expected_total_s else []
            self.progress = Progress(
                TextColumn("{task.description}", markup=False),
                TextColumn("{task.fields[live]}", markup=False),
                TimeElapsedColumn(),
                *eta,
                console=self.env.err,
                transient=True,
                # its figures change once a second; rich's default of 10 redraws a second
                # cost 1.5% of a core beside the measuring pgbench (benchmarks/controller)
                refresh_per_second=1,
            )
            self.progress.start()

    def step_started(self, step: StepRef, expected_s: float | None) -> None:
        with self.lock:
            klass = class_of(step)
            if not any(self.running.values()):
                scenario = step.params.get("scenario")
                self.label = f"{scenario}: {step.label}" if scenario else step.label
                if self.progress is None:
                    self.env.info(f"[{self.done}/{step.total} done] {self.label}")
            self.running[klass] += 1
            self.tps[klass][step.target] = 0.0
            if self.progress is not None:
                description = f"{self.label} | {klass} x{self.running[klass]}"
                if klass in self.tasks:
                    self.progress.update(self.tasks[klass], description=description, live="")
                else:
                    self.tasks[klass] = self.progress.add_task(description, total=None, live="")

    def step_progress(self, step: StepRef, t: float, values: dict[str, float]) -> None:
        if "tps" not in values:
            return
        with self.lock:
            klass = class_of(step)
            self.tps[klass][step.target] = values["tps"]
            if self.progress is not None and klass in self.tasks:
                total = sum(self.tps[klass].values())
                self.progress.update(self.tasks[klass], live=f"{total:,.0f} tps in all")

    def step_finished(self, step: StepRef, record: StepRecord) -> None:
        with self.lock:
            klass = class_of(step)
            self.finished[klass].append(record)
            self.running[klass] -= 1
            self.done += 1
            if self.running[klass] == 0:
                self._summary(klass, self.finished.pop(klass))
                self.tps.pop(klass, None)

    def _summary(self, klass: str, records: list[StepRecord]) -> None:
        done = [r for r in records if r.status == "completed"]
        tps = [
            float(r.metrics["tps"]) for r in done if isinstance(r.metrics.get("tps"), int | float)
        ]
        text = f"    {klass}: {len(done)}/{len(records)} instances completed"
        if tps:
            text += (
                f", {sum(tps):,.0f} TPS in all, {statistics.median(tps):,.0f} per instance "
                f"(min {min(tps):,.0f}, max {max(tps):,.0f})"
            )
        self.message(text)
        for record in records:
            if record.status != "completed":
                first = (record.error or "").splitlines()[:1]
                self.message(f"      {record.target}: {record.status}: {''.join(first)}")
                for line in error_cause(record.error)[-2:]:
                    self.message(f"        {line}")

    def message(self, text: str) -> None:
        if self.progress is not None:
            self.progress.console.print(text, markup=False)
        else:
            self.env.info(text)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
