"""The `--until ci=N%` stopping rule and what it reached, as pure functions.

While a run lasts, the runner (runner/interleaved.py) asks `stop_reason` after each round of a
test; when a run is read, `until_summary` says again, from the stored repetitions, which
figures reached the width and why each test stopped. Both judge with `figure_widths`.

Judged figures: those the test's workload declares (`judged_metrics`, plugin/workload.py): a
pgbench test's TPS (its average latency when the rate is fixed: the TPS is then the rate
asked); a fio test's read and write IOPS (those it did); by default a workload's first key
metric (pg_test_fsync: fdatasync/s). A workload without one (seqread) is not judged: it runs
the minimum number of times.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from howfast.analysis.groups import is_warmup, params_key, step_label
from howfast.analysis.stats import Stats, describe
from howfast.model import JSONValue, RunRecord, StepRecord
from howfast.plugin.registry import find
from howfast.until_rule import (
    BUDGET,
    DEFAULT_MAX_REPETITIONS,
    FAILED,
    INTERRUPTED,
    MAXIMUM,
    MIN_REPETITIONS,
    REACHED,
    STOPPED_WHY,
    UNJUDGED,
    width_text,
)


def round_order(targets: int, round_number: int) -> list[int]:
    """The targets' order in round `round_number` (from 1): forward in odd rounds, backward in
    even ones (A B, B A, A B ...), so that slow drift of the machine falls on each target
    alike."""
    forward = list(range(targets))
    return forward if round_number % 2 else forward[::-1]


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def judged_metrics(
    workload: str, params: Mapping[str, JSONValue], records: Sequence[StepRecord]
) -> tuple[str, ...]:
    """The figures whose interval the width applies to, for this test (its workload's
    `judged_metrics`); none for a workload this howfast does not know."""
    plugin = find(workload)
    return plugin.judged_metrics(params, records) if plugin is not None else ()


@dataclass(frozen=True)
class FigureWidth:
    """One judged figure of one test on one target: its interval against the width."""

    target: str
    metric: str
    stats: Stats | None  # None: no completed repetition had it
    width: float  # asked: the interval's half-width over the mean, e.g. 0.02
    minimum: int  # repetitions needed before it is judged

    @property
    def n(self) -> int:
        return self.stats.n if self.stats else 0

    @property
    def relative(self) -> float | None:
        """The interval's half-width over the mean (0.013 for ±1.3%); None below 2 values."""
        s = self.stats
        if s is None or s.ci_half is None or not s.mean:
            return None
        return s.ci_half / abs(s.mean)

    @property
    def reached(self) -> bool:
        return self.n >= self.minimum and self.relative is not None and self.relative <= self.width

    def document(self) -> dict[str, JSONValue]:
        s = self.stats
        return {
            "target": self.target,
            "metric": self.metric,
            "n": self.n,
            "mean": s.mean if s else None,
            "ci_low": s.ci_low if s else None,
            "ci_high": s.ci_high if s else None,
            "relative_half_width": self.relative,
            "reached": self.reached,
        }


def figure_widths(
    workload: str,
    params: Mapping[str, JSONValue],
    by_target: Mapping[str, Sequence[StepRecord]],
    width: float,
    minimum: int,
) -> list[FigureWidth]:
    """Each target's judged figures over its completed repetitions of one test."""
    everything = [r for records in by_target.values() for r in records]
    names = judged_metrics(workload, params, everything)
    found = []
    for target, records in by_target.items():
        for name in names:
            values = [
                v
                for r in records
                if r.status == "completed" and (v := _number(r.metrics.get(name))) is not None
            ]
            stats = describe(values) if values else None
            found.append(FigureWidth(target, name, stats, width, minimum))
    return found


@dataclass(frozen=True)
class RoundState:
    """Where a test stands after a round."""

    rounds: int  # rounds done
    failed: bool  # a repetition of this test failed
    spent_s: float  # wall time spent on this test's rounds
    share_s: float | None  # its share of the budget (None: no budget)


def stop_reason(
    state: RoundState, widths: Sequence[FigureWidth], minimum: int, maximum: int
) -> str | None:
    """None: run another round; else why the test stops (REACHED, BUDGET...). Another round
    is not begun when it would end past the test's share of the budget (a round is expected
    to last as long as the mean of those done); the budget wins over the minimum."""
    if state.failed:
        return FAILED
    if state.rounds >= maximum:
        return MAXIMUM
    if state.rounds >= minimum:
        if not widths:
            return UNJUDGED
        if all(w.reached for w in widths):
            return REACHED
    next_round_ends = state.spent_s + state.spent_s / max(1, state.rounds)
    if state.share_s is not None and state.rounds and next_round_ends > state.share_s:
        return BUDGET
    return None


def budget_share(remaining_s: float, tests_left: int) -> float:
    """A test's share of what is left of the budget: an equal part for it and each test after
    it, so that time an early test did not need passes on to the later ones."""
    return max(0.0, remaining_s) / max(1, tests_left)


# ---------------------------------------------------------------------------------------------
# On read: what a stored run's repetitions reached.


@dataclass(frozen=True)
class TestOutcome:
    workload: str
    params: dict[str, JSONValue]
    label: str
    rounds: int  # the most repetitions any target completed or tried
    stopped: str  # REACHED, BUDGET...
    figures: tuple[FigureWidth, ...]

    @property
    def reached(self) -> bool:
        return bool(self.figures) and all(f.reached for f in self.figures)

    def document(self) -> dict[str, JSONValue]:
        return {
            "workload": self.workload,
            "label": self.label,
            "params": self.params,
            "repetitions": self.rounds,
            "stopped": self.stopped,
            "reached": self.reached,
            "figures": [f.document() for f in self.figures],
        }


@dataclass(frozen=True)
class UntilSummary:
    ci: float
    minimum: int
    maximum: int
    budget_s: float | None
    tests: tuple[TestOutcome, ...]

    @property
    def percent(self) -> str:
        return width_text(self.ci)

    def document(self) -> dict[str, JSONValue]:
        return {
            "ci": self.ci,
            "min": self.minimum,
            "max": self.maximum,
            "budget_s": self.budget_s,
            "reached": all(t.reached for t in self.tests if t.figures),
            "tests": [t.document() for t in self.tests],
        }


def until_rule(step: StepRecord) -> dict[str, JSONValue] | None:
    rule = step.params.get("until")
    return rule if isinstance(rule, dict) and _number(rule.get("ci")) else None


def until_summary(run: RunRecord) -> UntilSummary | None:
    """What the run's `--until` repetitions reached; None for a run without them."""
    ruled = [s for s in run.steps if until_rule(s) is not None and not is_warmup(s)]
    if not ruled:
        return None
    rule = until_rule(ruled[0]) or {}
    ci = float(rule["ci"])
    minimum = int(rule.get("min") or MIN_REPETITIONS)
    maximum = int(rule.get("max") or DEFAULT_MAX_REPETITIONS)
    budget = _number(rule.get("budget_s"))
    tests: dict[tuple[str, str], dict[str, list[StepRecord]]] = {}
    for step in ruled:
        key = (step.workload, params_key(step.workload, step.all_params))
        tests.setdefault(key, {}).setdefault(step.target, []).append(step)
    last_key = (ruled[-1].workload, params_key(ruled[-1].workload, ruled[-1].all_params))
    outcomes = []
    for key, by_target in tests.items():
        first = next(iter(by_target.values()))[0]
        params = {k: v for k, v in first.params.items() if k not in ("repetition", "until")}
        widths = figure_widths(first.workload, first.all_params, by_target, ci, minimum)
        rounds = max(len(records) for records in by_target.values())
        failed = any(r.status != "completed" for rs in by_target.values() for r in rs)
        if widths and all(w.reached for w in widths):
            stopped = REACHED
        elif failed:
            stopped = FAILED
        elif run.status == "aborted" and key == last_key:
            stopped = INTERRUPTED
        elif rounds >= maximum:
            stopped = MAXIMUM
        elif not widths and rounds >= minimum:
            stopped = UNJUDGED
        else:
            stopped = BUDGET
        outcomes.append(
            TestOutcome(
                first.workload,
                params,
                step_label(first.workload, first.params),
                rounds,
                stopped,
                tuple(widths),
            )
        )
    return UntilSummary(ci, minimum, maximum, budget, tuple(outcomes))


def summary_lines(summary: UntilSummary) -> list[str]:
    """The terminal's account: which figures reached the width, which did not, and why each
    test stopped."""
    judged = [t for t in summary.tests if t.figures]
    reached = sum(t.reached for t in judged)
    lines = [
        f"until ci={summary.percent}: {reached} of {len(judged)} judged test(s) reached "
        f"±{summary.percent}" + (f" (budget {summary.budget_s:g} s)" if summary.budget_s else "")
    ]
    for test in summary.tests:
        parts = []
        for f in test.figures:
            rel = "no interval" if f.relative is None else f"±{f.relative:.1%}"
            mark = "reached" if f.reached else "NOT reached"
            parts.append(f"{f.metric} {rel} on {f.target} ({f.n}, {mark})")
        what = "; ".join(parts) if parts else "not judged"
        lines.append(
            f"  {test.label}: {test.rounds} repetition(s), stopped: "
            f"{STOPPED_WHY[test.stopped]}: {what}"
        )
    return lines
