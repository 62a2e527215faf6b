"""`howfast compare`: the same tests in two or more runs, side by side.

Tests are matched by target position, workload and parameters (not repetition), see
analysis/groups.py. The first run is the baseline: every other run's mean is set against it as
a ratio, and Welch's t-test says whether the difference is significant when both sides have
repetitions. Pure: runs in, a Comparison out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from howfast.analysis.envdiff import EnvDifference, environment_diff
from howfast.analysis.groups import StepGroup, group_steps
from howfast.analysis.metrics import KEY_METRICS, metric
from howfast.analysis.stats import ALPHA, MIN_REPETITIONS, Stats, welch
from howfast.model import JSONValue, RunRecord

CANNOT_JUDGE = "significance cannot be judged"


@dataclass(frozen=True)
class Difference:
    """One run's mean against the baseline's."""

    ratio: float | None  # other mean / baseline mean
    p_value: float | None
    significant: bool | None  # None: cannot be judged
    verdict: str

    def document(self) -> dict[str, JSONValue]:
        return {
            "ratio": self.ratio,
            "p_value": self.p_value,
            "significant": self.significant,
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class MetricComparison:
    metric: str
    values: tuple[Stats | None, ...]  # one per run
    differences: tuple[Difference | None, ...]  # one per run; None for the baseline
    warnings: tuple[str, ...] = ()

    def document(self) -> dict[str, JSONValue]:
        m = metric(self.metric)
        return {
            "metric": self.metric,
            "unit": m.unit,
            "higher_is_better": m.higher_is_better,
            "values": [v.document() if v else None for v in self.values],
            "differences": [d.document() if d else None for d in self.differences],
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class MatchedTest:
    target_index: int
    workload: str
    params: dict[str, JSONValue]
    label: str
    groups: tuple[StepGroup | None, ...]  # one per run
    metrics: tuple[MetricComparison, ...]
    warnings: tuple[str, ...] = ()

    @property
    def few_repetitions(self) -> bool:
        return min(g.n for g in self.groups if g) < MIN_REPETITIONS

    def verdicts(self) -> list[str | None]:
        """What limited the test in each run (analysis/why.py), for reading the differences."""
        return [group_verdict(g) for g in self.groups]

    def document(self) -> dict[str, JSONValue]:
        return {
            "target_index": self.target_index,
            "targets": [g.target if g else None for g in self.groups],
            "workload": self.workload,
            "params": self.params,
            "label": self.label,
            "repetitions": [g.n if g else 0 for g in self.groups],
            "metrics": [m.document() for m in self.metrics],
            "why": self.verdicts(),
            "warnings": list(self.warnings),
        }


def group_verdict(group: StepGroup | None) -> str | None:
    """The verdict most of a test's repetitions gave (analysis/why.py), or None."""
    found: dict[str, int] = {}
    for step in group.steps if group else []:
        why = step.sections.get("why")
        if isinstance(why, dict) and why.get("verdict"):
            found[str(why["verdict"])] = found.get(str(why["verdict"]), 0) + 1
    return max(found.items(), key=lambda kv: kv[1])[0] if found else None


@dataclass(frozen=True)
class RunRef:
    id: int
    plan: str
    label: str | None
    status: str
    started_at: str

    @property
    def title(self) -> str:
        return f"run {self.id}" + (f" ({self.label})" if self.label else "")


@dataclass
class Comparison:
    runs: list[RunRef]
    tests: list[MatchedTest] = field(default_factory=list)
    unmatched: list[tuple[int, str]] = field(default_factory=list)  # (run id, test label)
    environment: list[EnvDifference] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    alpha: float = ALPHA

    def document(self) -> dict[str, JSONValue]:
        return {
            "baseline": str(self.runs[0].id),
            "alpha": self.alpha,
            "runs": [
                {
                    "id": str(r.id),
                    "plan": r.plan,
                    "label": r.label,
                    "status": r.status,
                    "started_at": r.started_at,
                }
                for r in self.runs
            ],
            "tests": [t.document() for t in self.tests],
            "unmatched": [{"run": str(rid), "test": label} for rid, label in self.unmatched],
            "environment": [d.document() for d in self.environment],
            "warnings": self.warnings,
        }


def difference(base: Stats, other: Stats, higher_is_better: bool | None) -> Difference:
    ratio = other.mean / base.mean if base.mean else None
    test = welch(base, other)
    if test is None:
        smallest = min(base.n, other.n)
        reason = f"{smallest} repetition" if smallest < 2 else "no spread in either run's values"
        return Difference(ratio, None, None, f"{CANNOT_JUDGE} ({reason})")
    if not test.significant:
        return Difference(ratio, test.p_value, False, "no significant difference")
    higher = other.mean > base.mean
    if higher_is_better is None:
        verdict = "higher" if higher else "lower"
    else:
        verdict = "better" if higher == higher_is_better else "worse"
    return Difference(ratio, test.p_value, True, verdict)


def _compare_metric(name: str, groups: Sequence[StepGroup | None]) -> MetricComparison | None:
    values = tuple(g.value(name) if g else None for g in groups)
    base = values[0]
    if base is None or all(v is None for v in values[1:]):
        return None
    higher = metric(name).higher_is_better
    differences = tuple(
        None if i == 0 or v is None else difference(base, v, higher) for i, v in enumerate(values)
    )
    warnings = tuple(
        f"run {g.run_id}: {text}"
        for g in groups
        if g is not None
        for text in g.warnings.get(name, [])
    )
    return MetricComparison(name, values, differences, warnings)


def match_test(groups: Sequence[StepGroup | None]) -> MatchedTest:
    first = next(g for g in groups if g)
    metrics = tuple(
        found
        for name in KEY_METRICS.get(first.workload, ())
        if (found := _compare_metric(name, groups))
    )
    counts = [g.n for g in groups if g]
    warnings = []
    if min(counts) < MIN_REPETITIONS:
        warnings.append(
            f"fewer than {MIN_REPETITIONS} repetitions behind this comparison "
            f"({' vs '.join(str(c) for c in counts)})"
        )
    failed = [f"run {g.run_id}: {g.failed} failed" for g in groups if g and g.failed]
    if failed:
        warnings.append("steps that failed are left out: " + ", ".join(failed))
    return MatchedTest(
        target_index=first.target_index,
        workload=first.workload,
        params=first.params,
        label=first.label,
        groups=tuple(groups),
        metrics=metrics,
        warnings=tuple(warnings),
    )


def compare_runs(runs: Sequence[RunRecord]) -> Comparison:
    """Compare each run after the first with the first (the baseline)."""
    if len(runs) < 2:
        raise ValueError("a comparison needs two runs or more")
    comparison = Comparison(
        runs=[RunRef(r.id, r.plan, r.label, r.status, r.started_at) for r in runs],
        environment=environment_diff(runs),
    )
    per_run = [{g.key: g for g in group_steps(r)} for r in runs]
    keys = list(dict.fromkeys(k for groups in per_run for k in groups))
    for key in keys:
        groups = [by_key.get(key) for by_key in per_run]
        present = [g for g in groups if g]
        if len(present) < 2 or groups[0] is None:
            comparison.unmatched += [(g.run_id, f"{g.target}: {g.label}") for g in present]
            continue
        comparison.tests.append(match_test(groups))
    if not comparison.tests:
        comparison.warnings.append(
            "no test ran in the baseline and another run with the same workload and "
            "parameters on the same target position"
        )
    if any(t.few_repetitions for t in comparison.tests):
        comparison.warnings.append(
            f"some comparisons rest on fewer than {MIN_REPETITIONS} repetitions: "
            f"run with --repeat {MIN_REPETITIONS} or more to judge differences"
        )
    for d in comparison.environment:
        if d.matters:
            values = " vs ".join(v or "–" for v in d.values)
            comparison.warnings.append(f"{d.scope} {d.field} differs ({values}): {d.why}")
    return comparison
