"""An observer that passes every runner event to several observers, in order: the terminal's
progress first, then others (the live metrics exporter). An observer other than the first that
fails is reported once and left out; it never stops the run."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from howfast.model import StepRecord
from howfast.observer import RunObserver, StepRef


class FanOut:
    def __init__(self, first: RunObserver, *others: RunObserver, names: Sequence[str] = ()) -> None:
        """`names`: what each of `others` is, in words for the warning if it fails."""
        self.first = first
        self.others = list(others)
        self.names = {id(o): n for o, n in zip(others, names, strict=False)}

    def _each(self, call: Callable[[RunObserver], None]) -> None:
        call(self.first)
        for observer in list(self.others):
            try:
                call(observer)
            except Exception as exc:  # a metrics bug must not cost the benchmark
                self.others.remove(observer)
                what = self.names.get(id(observer), "an observer of the run")
                self.first.message(f"warning: {what} failed and is switched off: {exc}")

    def run_started(self, run_id: int, steps: int, targets: int) -> None:
        self._each(lambda o: o.run_started(run_id, steps, targets))

    def step_started(self, step: StepRef, expected_s: float | None) -> None:
        self._each(lambda o: o.step_started(step, expected_s))

    def step_progress(self, step: StepRef, t: float, values: dict[str, float]) -> None:
        self._each(lambda o: o.step_progress(step, t, values))

    def step_finished(self, step: StepRef, record: StepRecord) -> None:
        self._each(lambda o: o.step_finished(step, record))

    def message(self, text: str) -> None:
        self._each(lambda o: o.message(text))
