"""`howfast compare BASE NEW --fail-if 'tps<-5%'`: a CI gate on a comparison.

A threshold names a figure `compare` compares and the change that fails the gate: 'tps<-5%'
fails when NEW's mean TPS is more than 5% below BASE's, 'latency_p99_ms>+10%' when NEW's p99
latency is more than 10% above. A figure fails only when it is past its threshold **and** the
difference is significant by compare's own rule (Welch's t-test at ALPHA; the ratio's 95%
interval leaves out 1): noise past a threshold is not a regression. Where the significance
cannot be judged (one repetition on a side, no spread), or NEW has no value of a figure BASE
has, the gate says it cannot judge rather than pass. Pure: a Comparison in, a GateResult out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from howfast.analysis.compare import Comparison, Difference
from howfast.analysis.metrics import KEY_METRICS
from howfast.errors import ExitStatus, UsageError
from howfast.model import JSONValue

Outcome = Literal["fail", "pass", "cannot judge"]
_FORM = re.compile(
    r"^\s*(?P<metric>[A-Za-z0-9_.]+)\s*(?P<op>[<>])\s*(?P<sign>[+-]?)\s*"
    r"(?P<number>\d+(?:\.\d+)?|\.\d+)\s*(?P<percent>%?)\s*$"
)
EXAMPLES = "e.g. tps<-5% (fails when TPS falls by more than 5%), latency_p99_ms>+10%"


def gated_metrics() -> list[str]:
    """The figures a threshold may name: those `compare` compares, in catalogue order."""
    return list(dict.fromkeys(name for names in KEY_METRICS.values() for name in names))


@dataclass(frozen=True)
class Threshold:
    metric: str
    op: Literal["<", ">"]
    change: float  # -0.05 for '-5%'
    text: str

    def breached(self, ratio: float) -> bool:
        """Whether NEW/BASE = `ratio` is past the threshold."""
        limit = 1 + self.change
        return ratio < limit if self.op == "<" else ratio > limit


def parse_threshold(text: str, accepted: Sequence[str] | None = None) -> Threshold:
    """'tps<-5%' -> Threshold; UsageError saying what is wrong and what is accepted."""
    accepted = gated_metrics() if accepted is None else accepted
    found = _FORM.match(text)
    if found is None:
        raise UsageError(
            f"--fail-if {text!r}: not a threshold",
            f"write METRIC<-N% or METRIC>+N%, {EXAMPLES}",
        )
    metric, sign = found["metric"], found["sign"]
    op: Literal["<", ">"] = "<" if found["op"] == "<" else ">"
    if metric not in accepted:
        raise UsageError(
            f"--fail-if {text!r}: unknown metric {metric!r}",
            f"the figures compare compares: {', '.join(accepted)}",
        )
    if not found["percent"]:
        raise UsageError(
            f"--fail-if {text!r}: the change must be a percentage of BASE's value",
            f"write {metric}{op}{sign or ('-' if op == '<' else '+')}{found['number']}%",
        )
    wanted = "-" if op == "<" else "+"
    if sign != wanted:
        raise UsageError(
            f"--fail-if {text!r}: {op!r} needs a {'fall' if op == '<' else 'rise'} ({wanted}N%)",
            f"write {metric}{op}{wanted}{found['number']}%; {EXAMPLES}",
        )
    change = float(found["number"]) / 100 * (-1 if op == "<" else 1)
    if op == "<" and change <= -1:
        raise UsageError(
            f"--fail-if {text!r}: a figure cannot fall by 100% or more",
            "give a fall below 100%, e.g. 'tps<-5%'",
        )
    return Threshold(metric, op, change, text.strip())


@dataclass(frozen=True)
class Check:
    """One threshold on one figure of one matched test, for one run against BASE."""

    threshold: Threshold
    test: str  # 'pgbench tpcb-like, 1 client' (target position when there are several)
    against: str  # the run judged: 'run 14'
    outcome: Outcome
    reason: str
    ratio: float | None = None
    p_value: float | None = None
    significant: bool | None = None

    def document(self) -> dict[str, JSONValue]:
        return {
            "threshold": self.threshold.text,
            "metric": self.threshold.metric,
            "test": self.test,
            "run": self.against,
            "outcome": self.outcome,
            "ratio": self.ratio,
            "p_value": self.p_value,
            "significant": self.significant,
            "reason": self.reason,
        }

    def line(self) -> str:
        mark = {"fail": "FAIL", "pass": "ok", "cannot judge": "CANNOT JUDGE"}[self.outcome]
        return f"{mark:<12} {self.threshold.text:<24} {self.test}: {self.reason}"


@dataclass(frozen=True)
class GateResult:
    checks: tuple[Check, ...]

    @property
    def outcome(self) -> Outcome:
        outcomes = {c.outcome for c in self.checks}
        if "fail" in outcomes:
            return "fail"
        return "cannot judge" if "cannot judge" in outcomes or not self.checks else "pass"

    @property
    def exit_status(self) -> int:
        return {
            "fail": int(ExitStatus.ERROR),
            "pass": int(ExitStatus.OK),
            "cannot judge": int(ExitStatus.CANNOT_JUDGE),
        }[self.outcome]

    def summary(self) -> str:
        total = f"{len(self.checks)} check{'s' if len(self.checks) != 1 else ''}"
        failed = sum(c.outcome == "fail" for c in self.checks)
        unjudged = sum(c.outcome == "cannot judge" for c in self.checks)
        if self.outcome == "fail":
            return f"gate: FAILED ({failed} of {total} significantly past its threshold)"
        if self.outcome == "cannot judge":
            return (
                f"gate: cannot judge ({unjudged} of {total}): give runs made with --repeat 3 "
                "or more, which both ran the tests"
            )
        return f"gate: passed ({total}, none significantly past its threshold)"

    def document(self) -> dict[str, JSONValue]:
        return {
            "outcome": self.outcome,
            "exit_status": self.exit_status,
            "checks": [c.document() for c in self.checks],
        }


def _percent(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


def evaluate(comparison: Comparison, thresholds: Sequence[Threshold]) -> GateResult:
    """Every threshold against every matched test that has its figure, for each run after
    the first (BASE). A threshold no matched test has is a check that cannot judge."""
    checks: list[Check] = []
    several_targets = len({t.target_index for t in comparison.tests}) > 1
    for threshold in thresholds:
        found = False
        for test in comparison.tests:
            figure = next((m for m in test.metrics if m.metric == threshold.metric), None)
            base = test.groups[0]
            if figure is None and (base is None or base.value(threshold.metric) is None):
                continue  # a test without this figure
            found = True
            label = test.label + (f" (target {test.target_index + 1})" if several_targets else "")
            for index, run in enumerate(comparison.runs[1:], start=1):
                difference = figure.differences[index] if figure is not None else None
                checks.append(_check(threshold, label, run.name, difference))
        if not found:
            checks.append(
                Check(
                    threshold,
                    "(no test)",
                    ", ".join(r.name for r in comparison.runs[1:]),
                    "cannot judge",
                    f"no test that ran in both has {threshold.metric}",
                )
            )
    return GateResult(tuple(checks))


def _check(threshold: Threshold, label: str, against: str, difference: Difference | None) -> Check:
    """One run's difference from BASE on the threshold's figure (None: it has no value)."""
    if difference is None:
        return Check(
            threshold, label, against, "cannot judge", f"{against} has no completed value of it"
        )
    ratio = difference.ratio
    if ratio is None:
        return Check(
            threshold, label, against, "cannot judge", "BASE's mean is 0: no ratio to judge"
        )

    def judged(outcome: Outcome, reason: str) -> Check:
        return Check(
            threshold,
            label,
            against,
            outcome,
            reason,
            ratio=ratio,
            p_value=difference.p_value,
            significant=difference.significant,
        )

    said = difference.statement
    if difference.significant is None:
        return judged("cannot judge", said)
    change = _percent(ratio)
    if threshold.breached(ratio) and difference.significant:
        return judged("fail", f"{change}, past it: {said}")
    if threshold.breached(ratio):
        return judged("pass", f"{change}, past it but not significant: {said}")
    return judged("pass", f"{change}, within it: {said}")
