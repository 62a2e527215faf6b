"""Trials: one test's event repeated (`run --trials N`, or `--repeat N` of a step with events),
summed up as a decision needs it (docs/events.md#trials-the-statistics). Pure: derived when a
run is read, from each repetition's event figures (analysis/events.py).

A test is shown as trials when its steps had events and it has two repetitions or more, or
its steps carry `trials` (the number asked). Per trial, from its completed step:
- its outage is the event that cut the service longest (the largest downtime; every event
  when none cut it); its recovery is that event's;
- lost commits (proven and at most), in doubt: summed over the trial's events (their counting
  windows do not overlap);
- the standby's lag just before the kill: a failover's `standby_before.unflushed_bytes`.

Over the trials: how many lost a commit (proven), the probability of loss with its 95% Wilson
interval, lost commits per trial (median, max), the in-doubt total, and downtime and
recovery at p50, p95 and max by nearest rank (an observed value: below 20 trials the p95 is
the max). Against failure objectives (`--slo rto=10s,rpo=0`, slo.py) every trial must meet
them; a trial whose proven loss is within the rpo but whose in-doubt commits could take it
past is "cannot tell". Two designs' trials are compared in trials_compare.py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from howfast.analysis.events import EventFigures, step_figures
from howfast.analysis.groups import StepGroup, group_steps
from howfast.errors import UsageError
from howfast.model import JSONValue, RunRecord, StepRecord
from howfast.plugin.events import disturbs_service
from howfast.slo import RUN_KEY, FailureSlo, parse_failure_slo

CONFIDENCE = 0.95
PERCENTILE_METHOD = "nearest rank"
SLO_KEY = RUN_KEY
SLO_SOURCE_KEY = "slo_source"  # set when the run is read with --slo (never stored)


@dataclass(frozen=True)
class Trial:
    """One trial's figures; None where its events did not give one."""

    number: int  # 1..N: the repetition
    step_id: int | None
    events: tuple[str, ...]
    downtime_s: float | None
    down_to_end: bool  # no service until the step's end: the outage lasted at least this
    recovery_s: float | None
    lost: int | None
    lost_max: int | None
    in_doubt: int | None
    standby_lag_bytes: int | None

    def document(self) -> dict[str, JSONValue]:
        return {
            "trial": self.number,
            "step": None if self.step_id is None else str(self.step_id),
            "events": list(self.events),
            "downtime_s": _round(self.downtime_s, 3),
            "downtime_until_end": self.down_to_end,
            "recovery_s": _round(self.recovery_s, 2),
            "lost_commits": self.lost,
            "lost_commits_max": self.lost_max,
            "in_doubt": self.in_doubt,
            "standby_lag_bytes": self.standby_lag_bytes,
        }


@dataclass(frozen=True)
class Spread:
    """p50, p95 and max of a figure over the trials that have it (nearest rank)."""

    n: int
    p50: float | None
    p95: float | None
    max: float | None


def nearest_rank(values: Sequence[float], p: float) -> float | None:
    """The smallest value with at least p% of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p * len(ordered) / 100 - 1e-9)) - 1]


def spread(values: Sequence[float]) -> Spread:
    return Spread(
        len(values), nearest_rank(values, 50), nearest_rank(values, 95), max(values, default=None)
    )


def wilson_interval(k: int, n: int) -> tuple[float, float] | None:
    """The 95% Wilson score interval of a proportion k/n; None without trials."""
    if n <= 0:
        return None
    from scipy.stats import binomtest  # imported here: scipy.stats costs most commands 0.8 s

    ci = binomtest(k, n).proportion_ci(confidence_level=CONFIDENCE, method="wilson")
    return float(ci.low), float(ci.high)


# --- one trial ---------------------------------------------------------------------------------


def _standby_lag(figures: Sequence[EventFigures]) -> int | None:
    for fig in figures:
        seen = fig.mark.facts.get("standby_before")
        if isinstance(seen, Mapping):
            behind = seen.get("unflushed_bytes")
            if isinstance(behind, int) and not isinstance(behind, bool):
                return behind
    return None


def _sum(values: Sequence[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def trial_of(number: int, step: StepRecord, figures: Sequence[EventFigures]) -> Trial:
    applied = [f for f in figures if f.mark.applied_s is not None]
    cutting = [f for f in applied if disturbs_service(f.mark.action)] or applied
    outage = max(cutting, key=lambda f: f.downtime_s or 0.0, default=None)
    return Trial(
        number=number,
        step_id=step.id,
        events=tuple(f.mark.text for f in figures),
        downtime_s=outage.downtime_s if outage else None,
        down_to_end=any(f.gap is not None and not f.gap.closed for f in cutting),
        recovery_s=outage.recovery_s if outage else None,
        lost=_sum([f.lost.lost if f.lost else None for f in figures]),
        lost_max=_sum([f.lost.lost_max if f.lost else None for f in figures]),
        in_doubt=_sum([f.lost.in_doubt if f.lost else None for f in figures]),
        standby_lag_bytes=_standby_lag(figures),
    )


def _number(step: StepRecord) -> int:
    repetition = step.all_params.get("repetition")
    return repetition if isinstance(repetition, int) and not isinstance(repetition, bool) else 1


# --- the objectives ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TrialCheck:
    trial: int
    outcome: str  # "met", "missed", "cannot tell"
    reasons: tuple[str, ...]  # why missed, or why it cannot be told


def _s(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"


def check_trial(trial: Trial, slo: FailureSlo) -> TrialCheck:
    missed: list[str] = []
    unknown: list[str] = []
    if slo.rto_s is not None:
        rto = f"rto {_s(slo.rto_s)}"
        if trial.downtime_s is None:
            unknown.append("downtime not measured")
        elif trial.downtime_s > slo.rto_s:
            until = " (no service until the step's end)" if trial.down_to_end else ""
            missed.append(f"{_s(trial.downtime_s)} down{until} > {rto}")
        elif trial.down_to_end:
            unknown.append(f"no service until the step's end ({_s(trial.downtime_s)}), {rto}")
    if slo.rpo_commits is not None:
        rpo = f"rpo {slo.rpo_commits}"
        if trial.lost is None:
            unknown.append("lost commits not counted")
        elif trial.lost > slo.rpo_commits:
            missed.append(f"{trial.lost:,} commit{'s' if trial.lost != 1 else ''} lost > {rpo}")
        elif trial.lost_max is not None and trial.lost_max > slo.rpo_commits:
            unknown.append(
                f"{trial.lost:,} to {trial.lost_max:,} commits lost "
                f"({'?' if trial.in_doubt is None else f'{trial.in_doubt:,}'} in doubt), {rpo}"
            )
    if missed:
        return TrialCheck(trial.number, "missed", tuple(missed))
    if unknown:
        return TrialCheck(trial.number, "cannot tell", tuple(unknown))
    return TrialCheck(trial.number, "met", ())


@dataclass(frozen=True)
class SloVerdict:
    slo: str  # canonical text, "rto=10s,rpo=0"
    source: str  # "stored with the run" or "given"
    outcome: str  # "pass", "fail", "cannot tell"
    checks: tuple[TrialCheck, ...]
    failed_trials: tuple[int, ...]  # trial steps that did not complete

    @property
    def line(self) -> str:
        n = len(self.checks) + len(self.failed_trials)
        head = f"SLO {self.slo}"
        missed = [c for c in self.checks if c.outcome == "missed"]
        unknown = [c for c in self.checks if c.outcome == "cannot tell"]

        def named(checks: Sequence[TrialCheck]) -> list[str]:
            return [f"trial {c.trial} ({', '.join(c.reasons)})" for c in checks]

        if self.outcome == "pass":
            return f"{head}: passed: all {n} trials met it"
        untold = [*named(unknown), *(f"trial {t} (the step failed)" for t in self.failed_trials)]
        if not missed:
            return f"{head}: cannot tell: " + "; ".join(untold or ["no trial"])
        line = f"{head}: failed: {len(missed)} of {n} trials missed it: " + "; ".join(named(missed))
        return line + ("; cannot tell for " + "; ".join(untold) if untold else "")

    def document(self) -> dict[str, JSONValue]:
        return {
            "slo": self.slo,
            "source": self.source,
            "outcome": self.outcome,
            "trials": [
                {"trial": c.trial, "outcome": c.outcome, "reasons": list(c.reasons)}
                for c in self.checks
            ],
            "failed_trials": list(self.failed_trials),
            "line": self.line,
        }


def judge(
    trials: Sequence[Trial], failed: Sequence[int], slo: FailureSlo, source: str
) -> SloVerdict:
    """Passes only when every trial met every objective given."""
    checks = tuple(check_trial(t, slo) for t in trials)
    if any(c.outcome == "missed" for c in checks):
        outcome = "fail"
    elif failed or any(c.outcome == "cannot tell" for c in checks) or not checks:
        outcome = "cannot tell"
    else:
        outcome = "pass"
    return SloVerdict(slo.text, source, outcome, checks, tuple(failed))


def stored_slo(run: RunRecord) -> FailureSlo | None:
    """The objectives `run --slo rto=...` stored with the run; None without (or unreadable:
    a text howfast did not write)."""
    text = run.environment.get(SLO_KEY)
    if not isinstance(text, str):
        return None
    try:
        return parse_failure_slo(text)
    except UsageError:
        return None


def with_slo(run: RunRecord, slo: FailureSlo | None) -> RunRecord:
    """The run as read with `--slo` (results show, compare, report): the objectives given
    replace the stored ones for its verdicts; the run is not changed."""
    if slo is None:
        return run
    environment = {**run.environment, SLO_KEY: slo.text, SLO_SOURCE_KEY: "given"}
    return replace(run, environment=environment)


# --- a test's trials ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TrialsSummary:
    run_id: int
    target: str
    target_index: int
    workload: str
    label: str
    params: Mapping[str, JSONValue]  # the test params
    asked: int | None  # `trials` asked (None: repetitions of --repeat)
    trials: tuple[Trial, ...]  # the completed ones, in order
    failed: tuple[int, ...]  # the numbers of the trials whose step did not complete
    slo: SloVerdict | None = None

    @property
    def counted(self) -> list[Trial]:
        """The trials whose lost commits were counted."""
        return [t for t in self.trials if t.lost is not None]

    @property
    def with_loss(self) -> int:
        return sum(1 for t in self.counted if (t.lost or 0) > 0)

    @property
    def with_possible_loss(self) -> int:
        """Proven, or possible if every in-doubt commit hid a lost one."""
        return sum(1 for t in self.counted if (t.lost_max or 0) > 0)

    @property
    def p_loss(self) -> float | None:
        n = len(self.counted)
        return self.with_loss / n if n else None

    @property
    def p_loss_ci95(self) -> tuple[float, float] | None:
        return wilson_interval(self.with_loss, len(self.counted))

    @property
    def lost_median(self) -> float | None:
        lost = [t.lost for t in self.counted if t.lost is not None]
        return float(statistics.median(lost)) if lost else None

    @property
    def lost_max(self) -> int | None:
        return max((t.lost for t in self.counted if t.lost is not None), default=None)

    @property
    def lost_max_possible(self) -> int | None:
        return max((t.lost_max for t in self.counted if t.lost_max is not None), default=None)

    @property
    def in_doubt_total(self) -> int | None:
        return _sum([t.in_doubt for t in self.trials])

    @property
    def downtime(self) -> Spread:
        return spread([t.downtime_s for t in self.trials if t.downtime_s is not None])

    @property
    def recovery(self) -> Spread:
        return spread([t.recovery_s for t in self.trials if t.recovery_s is not None])

    def loss_line(self) -> str:
        """'commits lost in 4 of 10 trials (P = 0.40, 95% CI 0.17–0.69)'."""
        n = len(self.counted)
        if not n:
            return f"commits lost: not counted in any of {len(self.trials)} trials"
        ci = self.p_loss_ci95
        assert ci is not None and self.p_loss is not None
        line = (
            f"commits lost in {self.with_loss} of {n} trials "
            f"(P = {self.p_loss:.2f}, 95% CI {ci[0]:.2f}–{ci[1]:.2f})"
        )
        if self.with_possible_loss > self.with_loss:
            line += f"; possibly in {self.with_possible_loss} (commits in doubt)"
        return line

    def lines(self) -> list[str]:
        """The summary in words, after the table."""
        out = [self.loss_line()]
        if self.counted:
            lost = f"lost per trial: median {_count(self.lost_median)}, max {self.lost_max}"
            if (self.lost_max_possible or 0) > (self.lost_max or 0):
                lost += f" (up to {self.lost_max_possible} with those in doubt)"
            out.append(f"{lost}; in doubt: {self.in_doubt_total or 0} in all")
        spreads = []
        for name, s in (("downtime", self.downtime), ("recovery", self.recovery)):
            if s.n:
                missing = len(self.trials) - s.n
                spreads.append(
                    f"{name}: p50 {_s(s.p50 or 0)}, p95 {_s(s.p95 or 0)}, max {_s(s.max or 0)}"
                    + (f" ({missing} trials without a figure)" if missing else "")
                )
            elif self.trials:  # the events' lines say why (too few seconds before...)
                spreads.append(f"{name}: no figure in any trial")
        if spreads and len(self.trials) < 20:
            spreads.append("(p95 by nearest rank: below 20 trials it is the max)")
        out += spreads
        if self.failed:
            out.append(
                f"{len(self.failed)} trial(s) failed and are not counted: "
                + ", ".join(str(n) for n in self.failed)
            )
        if self.slo is not None:
            out.append(self.slo.line)
        return out

    def document(self) -> dict[str, JSONValue]:
        ci = self.p_loss_ci95
        down, rec = self.downtime, self.recovery
        return {
            "target": self.target,
            "target_index": self.target_index,
            "workload": self.workload,
            "label": self.label,
            "params": dict(self.params),
            "trials_asked": self.asked,
            "trials": len(self.trials),
            "trials_failed": list(self.failed),
            "trials_counted": len(self.counted),
            "trials_with_loss": self.with_loss,
            "trials_with_possible_loss": self.with_possible_loss,
            "p_loss": _round(self.p_loss, 4),
            "p_loss_ci95": [round(ci[0], 4), round(ci[1], 4)] if ci else None,
            "lost_commits_median": self.lost_median,
            "lost_commits_max": self.lost_max,
            "lost_commits_max_possible": self.lost_max_possible,
            "in_doubt_total": self.in_doubt_total,
            "percentile_method": PERCENTILE_METHOD,
            "downtime_p50_s": _round(down.p50, 3),
            "downtime_p95_s": _round(down.p95, 3),
            "downtime_max_s": _round(down.max, 3),
            "recovery_p50_s": _round(rec.p50, 2),
            "recovery_p95_s": _round(rec.p95, 2),
            "recovery_max_s": _round(rec.max, 2),
            "recovery_missing": len(self.trials) - rec.n,
            "per_trial": [t.document() for t in self.trials],
            "slo": self.slo.document() if self.slo else None,
            "lines": list(self.lines()),
        }


def _count(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:g}"


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _asked(steps: Sequence[StepRecord]) -> int | None:
    for step in steps:
        asked = step.all_params.get("trials")
        if isinstance(asked, int) and not isinstance(asked, bool):
            return asked
    return None


def group_trials(group: StepGroup, run_id: int) -> TrialsSummary | None:
    """The group's trials; None when it is not a test with trials."""
    asked = _asked(group.steps)
    trials: list[Trial] = []
    failed: list[int] = []
    for step in group.steps:
        if step.status != "completed":
            if step.status != "skipped" or asked is not None:
                failed.append(_number(step))
            continue
        figures = step_figures(step.sections, step.histograms)
        if figures:
            trials.append(trial_of(_number(step), step, figures))
    if not trials or (len(group.steps) < 2 and asked is None):
        return None
    return TrialsSummary(
        run_id,
        group.target,
        group.target_index,
        group.workload,
        group.label,
        group.params,
        asked,
        tuple(trials),
        tuple(failed),
    )


def run_trials(run: RunRecord, slo: FailureSlo | None = None) -> list[TrialsSummary]:
    """The run's tests with trials, in the order they ran; judged against `slo` (given when
    the run is read), else against the objectives stored with the run."""
    if not any(isinstance(s.sections.get("events"), Mapping) for s in run.steps):
        return []  # no event step: nothing to group again (most runs)
    source = "given"
    if slo is None:
        slo = stored_slo(run)
        given = run.environment.get(SLO_SOURCE_KEY) == "given"
        source = "given" if given else "stored with the run"
    found = []
    for group in group_steps(run):
        summary = group_trials(group, run.id)
        if summary is None:
            continue
        if slo is not None:
            verdict = judge(summary.trials, summary.failed, slo, source)
            summary = replace(summary, slo=verdict)
        found.append(summary)
    return found
