"""Two designs' trials side by side (docs/events.md#two-designs-do-their-losses-differ): for
each test with trials in the baseline and another run, each side's loss line and whether the
probabilities of loss differ, by Fisher's exact test on the two counts. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from howfast.analysis.groups import params_key
from howfast.analysis.stats import ALPHA
from howfast.analysis.trials import TrialsSummary, run_trials
from howfast.model import JSONValue, RunRecord


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(frozen=True)
class LossComparison:
    """Whether two tests' probabilities of loss differ: Fisher's exact test (two-sided) on
    (trials with loss, trials without) of each."""

    a: tuple[int, int]  # (with loss, counted)
    b: tuple[int, int]
    p_value: float | None

    @property
    def significant(self) -> bool | None:
        return None if self.p_value is None else self.p_value < ALPHA

    def statement(self, name_a: str, name_b: str) -> str:
        (ka, na), (kb, nb) = self.a, self.b
        counts = f"loss in {ka} of {na} trials ({name_a}) vs {kb} of {nb} ({name_b})"
        if self.p_value is None:
            return f"{counts}: cannot be compared (no trial counted on one side)"
        verdict = (
            "the probabilities of loss differ"
            if self.significant
            else "no significant difference in the probability of loss"
        )
        return f"{counts}: {verdict} (Fisher's exact test, p = {self.p_value:.3g})"

    def document(self, name_a: str, name_b: str) -> dict[str, JSONValue]:
        return {
            "trials_with_loss": [self.a[0], self.b[0]],
            "trials_counted": [self.a[1], self.b[1]],
            "test": "Fisher's exact test, two-sided",
            "p_value": _round(self.p_value, 6),
            "significant": self.significant,
            "statement": self.statement(name_a, name_b),
        }


def compare_loss(a: TrialsSummary, b: TrialsSummary) -> LossComparison:
    ka, na = a.with_loss, len(a.counted)
    kb, nb = b.with_loss, len(b.counted)
    if not na or not nb:
        return LossComparison((ka, na), (kb, nb), None)
    from scipy.stats import fisher_exact  # imported here, as in wilson_interval

    result = fisher_exact([[ka, na - ka], [kb, nb - kb]], alternative="two-sided")
    return LossComparison((ka, na), (kb, nb), float(result.pvalue))


def _side(name: str, summary: TrialsSummary) -> dict[str, JSONValue]:
    ci = summary.p_loss_ci95
    return {
        "side": name,
        "run": str(summary.run_id),
        "target": summary.target,
        "trials": len(summary.trials),
        "trials_counted": len(summary.counted),
        "trials_with_loss": summary.with_loss,
        "p_loss": _round(summary.p_loss, 4),
        "p_loss_ci95": [round(ci[0], 4), round(ci[1], 4)] if ci else None,
        "lost_commits_max": summary.lost_max,
        "downtime_p95_s": _round(summary.downtime.p95, 3),
        "recovery_p95_s": _round(summary.recovery.p95, 2),
        "slo": summary.slo.outcome if summary.slo else None,
        "line": f"{name}: {summary.loss_line()}",
    }


def compare_trials(runs: Sequence[RunRecord], names: Sequence[str]) -> list[dict[str, JSONValue]]:
    """The baseline's tests with trials matched in the other runs (target position, workload,
    test params), each with its sides and, for each run after the first, whether its
    probability of loss differs from the baseline's (`compare_loss`)."""
    per_run = [{(t.target_index, t.workload, params_key(t.workload, t.params)): t
                for t in run_trials(r)} for r in runs]  # fmt: skip
    found: list[dict[str, JSONValue]] = []
    for key, base in per_run[0].items():
        others = [by_key.get(key) for by_key in per_run[1:]]
        if not any(others):
            continue
        sides: list[JSONValue] = [_side(names[0], base)]
        differences: list[JSONValue] = [None]
        for name, other in zip(names[1:], others, strict=True):
            sides.append(_side(name, other) if other else None)
            differences.append(
                compare_loss(base, other).document(names[0], name) if other else None
            )
        found.append(
            {
                "target_index": base.target_index,
                "workload": base.workload,
                "label": base.label,
                "params": dict(base.params),
                "sides": sides,
                "differences": differences,
            }
        )
    return found
