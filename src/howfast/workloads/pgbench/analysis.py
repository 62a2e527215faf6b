"""pgbench's part of reading a run (analysis/hooks.py), with the analysis toolkit it uses
(analysis/why.py, rate_verdicts.py, percentiles.py, working_set.py):

- per step: percentiles from too few transactions to bound them, the rate and objective
  verdicts of a fixed-rate step, whether an in-memory or on-disk step read what its regime
  says, and what limited the step (its `why` section, docs/why.md);
- per run: each rate curve's saturation point, knee and highest rate meeting the objective, on
  its last step;
- what a step says of the commit path: one connection committing as fast as it can
  (tpcb-like at 1 client), beside the storage's ceiling (analysis/probe.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from howfast.analysis import percentiles, rate_verdicts, why
from howfast.analysis.events import step_events
from howfast.analysis.hooks import (
    NOTHING_DERIVED,
    DeriveContext,
    Derived,
    Evidence,
    WorkloadAnalysis,
    apply,
)
from howfast.analysis.loaded_data import latest_load
from howfast.analysis.working_set import regime_warnings
from howfast.model import JSONValue, StepRecord


def _num(value: JSONValue) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def percentile_trust(step: StepRecord) -> Derived:
    """Percentiles from too few transactions to bound them (analysis/percentiles.py)."""
    short = percentiles.too_few_samples(step.metrics)
    warning = percentiles.too_few_warning(step.metrics, short)
    return Derived(
        metrics={percentiles.SHORT_METRIC: list(short)} if short else {},
        warnings=(warning,) if warning else (),
    )


def rate_verdicts_of(step: StepRecord) -> Derived:
    params = step.all_params
    verdicts = rate_verdicts.step_rate_metrics(params, step.metrics, step.series.get("lag_ms", []))
    warning = rate_verdicts.rate_warning(params, verdicts)
    return Derived(verdicts, rate_verdicts.RATE_METRICS, (warning,) if warning else ())


def regime_warnings_of(step: StepRecord, before: Sequence[StepRecord]) -> Derived:
    """Whether the step read what its regime says, from the target's latest load."""
    params = step.all_params
    if params.get("warmup"):
        return NOTHING_DERIVED
    load = latest_load(before)
    if load is None or load.status != "completed":
        return NOTHING_DERIVED
    size = load.metrics.get("db_size_bytes")
    dataset = params.get("dataset")
    found = regime_warnings(
        str(dataset) if dataset is not None else None,
        size if isinstance(size, int) else None,
        step.metrics,
        step.sections,
    )
    return Derived(warnings=tuple(found))


def verdict_of(
    step: StepRecord, before: Sequence[StepRecord], settings: Mapping[str, str] | None
) -> Derived:
    """What limited the step (docs/why.md), in its `why` section."""
    if step.all_params.get("warmup") is True:
        return NOTHING_DERIVED
    verdict = why.decide(why.step_facts(step, before, settings))
    return Derived(sections={"why": verdict.section()})


def events_of(step: StepRecord) -> Derived:
    """Each event's figures (issue 29, analysis/events.py), from the stored load, beside the
    marks in the events section; the run document shows them as the step's events list."""
    section = step.sections.get("events")
    if not isinstance(section, Mapping):
        return NOTHING_DERIVED
    figures = step_events(step.sections, step.histograms)
    return Derived(sections={"events": {**section, "figures": figures}})


class PgbenchAnalysis(WorkloadAnalysis):
    def derive_step(
        self, step: StepRecord, before: Sequence[StepRecord], ctx: DeriveContext
    ) -> Derived:
        events = events_of(step)  # a failed step's events have their figures too
        if step.status != "completed":
            return events
        total = events
        out = step
        for part in (percentile_trust(out), rate_verdicts_of(out)):
            out, total = apply(out, part), total.then(part)
        part = regime_warnings_of(out, before)
        out, total = apply(out, part), total.then(part)
        return total.then(verdict_of(out, before, ctx.target_settings))

    def derive_run(self, steps: Sequence[StepRecord]) -> Mapping[int, Derived]:
        """A curve's saturation point, knee and highest rate meeting the objective, on its
        last step: the one the plan marked (`curve_last`), or for curves howfast did not
        plan (imports), the last fixed-rate step of the curve."""
        curves: dict[tuple[str, str], list[int]] = {}
        for index, step in enumerate(steps):
            if rate_verdicts.in_curve(step.all_params):
                key = (step.target, rate_verdicts.curve_key(step.all_params))
                curves.setdefault(key, []).append(index)
        out: dict[int, Derived] = {}
        for indexes in curves.values():
            members = [steps[i] for i in indexes]
            planned = any(
                "curve_role" in s.all_params or "curve_last" in s.all_params for s in members
            )
            rated = [s for s in members if isinstance(s.all_params.get("rate"), int | float)]
            rated_ids = {id(s) for s in rated}
            for position, step in enumerate(members):
                last = step.all_params.get("curve_last") is True if planned else step is rated[-1]
                if not last or step.status != "completed" or (not planned and len(rated) < 2):
                    continue
                points = [
                    (s.all_params, s.metrics)
                    for s in members[:position]
                    if s.status == "completed" and id(s) in rated_ids
                ]
                points.append((step.all_params, step.metrics))
                found = rate_verdicts.curve_metrics(points)
                out[indexes[position]] = Derived(found, rate_verdicts.CURVE_METRICS)
        return out

    def series_needed(self, step: StepRecord) -> frozenset[str]:
        """The schedule lag of a fixed-rate step (its rate verdict)."""
        return frozenset({"lag_ms"}) if step.all_params.get("rate") is not None else frozenset()

    def evidence(self, step: StepRecord) -> Evidence | None:
        """One connection committing as fast as it can: tpcb-like at 1 client (its average
        latency bounds a WAL flush from above)."""
        p = step.all_params
        if (
            step.status != "completed"
            or p.get("mode") != "tpcb-like"
            or p.get("clients") != 1
            or p.get("warmup") is True
        ):
            return None
        tps, latency = _num(step.metrics.get("tps")), _num(step.metrics.get("latency_avg_ms"))
        if tps is None and latency is None:
            return None
        return Evidence(commit_tps=tps, commit_latency_ms=latency)

    def verdict_label(self, step: StepRecord) -> str:
        """'tpcb-like at 4 clients', as the why verdicts name a test."""
        p = step.all_params
        clients = p.get("clients")
        who = f" at {clients} client{'s' if clients != 1 else ''}" if clients else ""
        return f"{p.get('mode') or 'a custom script'}{who}"


ANALYSIS = PgbenchAnalysis()
