"""`howfast compare`: the same tests in two or more runs, side by side.

Tests are matched by target position, workload and parameters (not repetition), see
analysis/groups.py. The first run is the baseline: every other run's mean is set against it as
a ratio with its 95% interval (Fieller's, with Welch's degrees of freedom: it leaves out 1
exactly when Welch's t-test finds the difference significant), and one sentence says it:
"run 14 is 1.32x run 12 (95% CI 1.27-1.37), significant", or, when both runs measured the
figure to an `--until` width, "no difference found within 2%". Pure: runs in, a Comparison out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from howfast.analysis.envdiff import EnvDifference, environment_diff
from howfast.analysis.groups import StepGroup, group_steps
from howfast.analysis.metrics import KEY_METRICS, metric
from howfast.analysis.replication import design_document, design_rows, shows_designs
from howfast.analysis.stats import ALPHA, CONFIDENCE, Stats, t_quantile, welch
from howfast.analysis.trials_compare import compare_trials
from howfast.model import JSONValue, RunRecord
from howfast.until_rule import MIN_REPETITIONS

CANNOT_JUDGE = "significance cannot be judged"


@dataclass(frozen=True)
class Difference:
    """One run's mean against the baseline's."""

    ratio: float | None  # other mean / baseline mean
    p_value: float | None
    significant: bool | None  # None: cannot be judged
    verdict: str
    ratio_ci: tuple[float, float] | None = None  # 95% interval of the ratio; None: unbounded
    # Not significant, and the ratio's interval within 1 ± this width (both runs' `--until`
    # ci): the data rule out a difference as large as the width the user asked to resolve.
    within: float | None = None
    statement: str = ""  # the sentence: "run 14 is 1.32x run 12 (95% CI 1.27-1.37)..."

    def document(self) -> dict[str, JSONValue]:
        return {
            "ratio": self.ratio,
            "ratio_ci_low": self.ratio_ci[0] if self.ratio_ci else None,
            "ratio_ci_high": self.ratio_ci[1] if self.ratio_ci else None,
            "p_value": self.p_value,
            "significant": self.significant,
            "verdict": self.verdict,
            "within": self.within,
            "statement": self.statement,
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
    params: Mapping[str, JSONValue]
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
    target: str | None = None  # comparing the targets of one run: this side's target

    @property
    def name(self) -> str:
        """What the sentences and columns call it: 'run 12', or the target's name."""
        return self.target if self.target is not None else f"run {self.id}"

    @property
    def title(self) -> str:
        if self.target is not None:
            return self.target
        return f"run {self.id}" + (f" ({self.label})" if self.label else "")


@dataclass
class Comparison:
    runs: list[RunRef]
    tests: list[MatchedTest] = field(default_factory=list)
    unmatched: list[tuple[int, str]] = field(default_factory=list)  # (run id, test label)
    environment: list[EnvDifference] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    alpha: float = ALPHA
    # Each run's targets' durability verdicts (analysis/durability.py), shown first
    durability: list[dict[str, JSONValue]] = field(default_factory=list)
    # Each run's designs (analysis/replication.py), where a run has standbys or is the
    # replication plan: {"run", "target", "design", "tps": {clients: tps}, ...}
    designs: list[dict[str, JSONValue]] = field(default_factory=list)
    # Tests with trials in the baseline and another run: their loss counts compared by an
    # exact test (analysis/trials.py `compare_trials`)
    trials: list[dict[str, JSONValue]] = field(default_factory=list)

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
                    "target": r.target,
                }
                for r in self.runs
            ],
            "tests": [t.document() for t in self.tests],
            "unmatched": [{"run": str(rid), "test": label} for rid, label in self.unmatched],
            "environment": [d.document() for d in self.environment],
            "warnings": self.warnings,
            "durability": self.durability,
            "designs": self.designs,
            "trials": self.trials,
        }


def ratio_interval(
    base: Stats, other: Stats, df: float, confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """Fieller's interval of other.mean / base.mean: the ratios r for which
    (other.mean - r * base.mean) / sqrt(se_other^2 + r^2 se_base^2) lies within Student's t of
    `df` degrees of freedom. None when it is unbounded (the baseline's mean is not clearly
    away from zero)."""
    if base.stdev is None or other.stdev is None:
        return None
    t = t_quantile((1 + confidence) / 2, df)
    vb, vo = base.stdev**2 / base.n, other.stdev**2 / other.n
    mb, mo = base.mean, other.mean
    a = mb * mb - t * t * vb
    if a <= 0:
        return None
    root = t * math.sqrt(max(0.0, mb * mb * vo + mo * mo * vb - t * t * vb * vo))
    return ((mo * mb - root) / a, (mo * mb + root) / a)


def _ratio_text(ratio: float, interval: tuple[float, float] | None) -> tuple[str, str]:
    """('1.32x', '(95% CI 1.27-1.37)'): three decimals where two would hide the interval."""
    digits = 2 if interval is None or interval[1] - interval[0] >= 0.02 else 3
    ci = "" if interval is None else f"(95% CI {interval[0]:.{digits}f}-{interval[1]:.{digits}f})"
    if abs(ratio) >= 1e6:  # a baseline of almost nothing: not a 300-digit ratio
        return f"{ratio:.3g}x", ci
    return f"{ratio:.{digits}f}x", ci


def difference(
    base: Stats,
    other: Stats,
    higher_is_better: bool | None,
    *,
    names: tuple[str, str] = ("the other run", "the baseline"),
    width: float | None = None,
) -> Difference:
    """`other` against `base`; `names` (other's, base's) for the sentence; `width`: the
    `--until` width both runs were measured to, if any."""
    other_name, base_name = names
    ratio = other.mean / base.mean if base.mean else None
    if ratio is not None and not math.isfinite(ratio):  # a baseline of almost nothing
        ratio = None
    test = welch(base, other)
    if test is None:
        smallest = min(base.n, other.n)
        reason = f"{smallest} repetition" if smallest < 2 else "no spread in either run's values"
        verdict = f"{CANNOT_JUDGE} ({reason})"
        said = f"{other_name} is {_ratio_text(ratio, None)[0]} {base_name}" if ratio else ""
        return Difference(ratio, None, None, verdict, statement=f"{said}; {verdict}".lstrip("; "))
    interval = ratio_interval(base, other, test.df)
    times, ci = _ratio_text(ratio, interval) if ratio is not None else ("?", "")
    shown = f"{other_name} is {times} {base_name} {ci}".strip()
    if not test.significant:
        # The claim "within 2%" needs the whole interval of the ratio inside 0.98-1.02: each
        # run's own interval at ±2% is not enough (the ratio's is about 1.4 times wider).
        within = (
            width
            if width is not None
            and interval is not None
            and 1 - width <= interval[0]
            and interval[1] <= 1 + width
            else None
        )
        if within is not None:
            said = f"no difference found within {within * 100:g}% {ci}"
        else:
            said = f"no significant difference: {shown}"
            if interval is not None:
                largest = max(1 - interval[0], interval[1] - 1)
                said += f"; a difference of up to {largest:.1%} is not ruled out"
        return Difference(
            ratio, test.p_value, False, "no significant difference", interval, within, said.strip()
        )
    higher = other.mean > base.mean
    if higher_is_better is None:
        verdict = "higher" if higher else "lower"
    else:
        verdict = "better" if higher == higher_is_better else "worse"
    said = f"{shown}, significant ({verdict})"
    return Difference(ratio, test.p_value, True, verdict, interval, None, said)


def until_width(group: StepGroup | None) -> float | None:
    """The `--until` width a test's repetitions ran to (params.until.ci), if any."""
    for step in group.steps if group else []:
        rule = step.params.get("until")
        if isinstance(rule, dict) and isinstance(rule.get("ci"), int | float):
            return float(rule["ci"])
    return None


def _compare_metric(
    name: str, groups: Sequence[StepGroup | None], titles: Sequence[str]
) -> MetricComparison | None:
    values = tuple(g.value(name) if g else None for g in groups)
    base = values[0]
    if base is None or all(v is None for v in values[1:]):
        return None
    higher = metric(name).higher_is_better
    widths = [until_width(g) for g in groups]

    def against_base(i: int, v: Stats) -> Difference:
        # "within 2%" only when both runs asked for a width: the looser of the two
        asked = [w for w in (widths[0], widths[i]) if w is not None]
        width = max(asked) if len(asked) == 2 else None
        return difference(base, v, higher, names=(titles[i], titles[0]), width=width)

    differences = tuple(
        None if i == 0 or v is None else against_base(i, v) for i, v in enumerate(values)
    )
    warnings = tuple(
        f"run {g.run_id}: {text}"
        for g in groups
        if g is not None
        for text in g.warnings.get(name, [])
    )
    return MetricComparison(name, values, differences, warnings)


def match_test(
    groups: Sequence[StepGroup | None], titles: Sequence[str] | None = None
) -> MatchedTest:
    first = next(g for g in groups if g)
    names = list(titles) if titles else [f"run {g.run_id}" if g else "?" for g in groups]
    metrics = tuple(
        found
        for name in KEY_METRICS.get(first.workload, ())
        if (found := _compare_metric(name, groups, names))
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


def compare_targets(run: RunRecord) -> Comparison:
    """Compare each target of one run with its first target (an `--until` run measured them
    interleaved, so that slow drift of the machine fell on each alike)."""
    names = [t.name for t in run.targets]
    if len(names) < 2:
        raise ValueError("comparing the targets of a run needs a run with two targets or more")
    sides = [
        replace(
            run,
            targets=[t],
            steps=[s for s in run.steps if s.target == t.name],
        )
        for t in run.targets
    ]
    return compare_runs(sides, targets=names)


def compare_runs(runs: Sequence[RunRecord], *, targets: Sequence[str] | None = None) -> Comparison:
    """Compare each run after the first with the first (the baseline). `targets`: the runs
    are one run's targets, one each, named so (compare_targets)."""
    if len(runs) < 2:
        raise ValueError("a comparison needs two runs or more")
    comparison = Comparison(
        runs=[
            RunRef(r.id, r.plan, r.label, r.status, r.started_at, targets[i] if targets else None)
            for i, r in enumerate(runs)
        ],
        environment=environment_diff(runs),
    )
    comparison.durability = [
        {"run": str(r.id), "side": ref.name, "target_index": index, "target": t.name,
         "verdict": doc.get("verdict"), "reason": doc.get("reason")}
        for r, ref in zip(runs, comparison.runs, strict=True)
        for index, t in enumerate(r.targets)
        if isinstance(doc := t.derived.get("durability"), dict)
    ]  # fmt: skip
    comparison.designs = [
        {"run": str(r.id), **design_document(row)}
        for r in runs
        if shows_designs(r, rows := design_rows(r))
        for row in rows
    ]
    comparison.trials = compare_trials(runs, [r.name for r in comparison.runs])
    per_run = [{g.key: g for g in group_steps(r)} for r in runs]
    keys = list(dict.fromkeys(k for groups in per_run for k in groups))
    for key in keys:
        groups = [by_key.get(key) for by_key in per_run]
        present = [g for g in groups if g]
        if len(present) < 2 or groups[0] is None:
            comparison.unmatched += [(g.run_id, f"{g.target}: {g.label}") for g in present]
            continue
        comparison.tests.append(match_test(groups, [r.name for r in comparison.runs]))
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
