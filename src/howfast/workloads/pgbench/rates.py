"""Fixed-rate pgbench steps: resolve a fraction of the measured maximum into a rate, judge
whether the rate was met, apply a latency objective, and sum up a finished curve.

Pure functions over params, metrics and earlier step records; the workload calls them.
"""

from __future__ import annotations

from collections.abc import Sequence

from howfast.analysis.latency_curve import (
    RatePoint,
    find_knee,
    highest_rate_meeting,
    parse_slo,
    rate_verdict,
    slo_verdict,
)
from howfast.model import JSONValue, Sample, StepRecord


def _same_curve(a: dict[str, JSONValue], b: dict[str, JSONValue]) -> bool:
    keys = ("mode", "scripts", "clients", "settings")
    return all(a.get(k) == b.get(k) for k in keys)


def max_tps_before(params: dict[str, JSONValue], previous: Sequence[StepRecord]) -> float | None:
    """TPS of the latest completed full-speed step of the same curve."""
    for step in reversed(previous):
        if (
            step.workload == "pgbench"
            and step.params.get("curve_role") == "max"
            and step.status == "completed"
            and _same_curve(step.params, params)
        ):
            tps = step.metrics.get("tps")
            return float(tps) if isinstance(tps, int | float) else None
    return None


def resolve_rate(params: dict[str, JSONValue], previous: Sequence[StepRecord]) -> float | None:
    """The offered rate of this step: its own `rate`, or `rate_fraction` of the maximum TPS
    measured just before. Raises ValueError when a fraction has nothing to be taken of."""
    rate = params.get("rate")
    if isinstance(rate, int | float):
        return float(rate)
    fraction = params.get("rate_fraction")
    if not isinstance(fraction, int | float):
        return None
    max_tps = max_tps_before(params, previous)
    if not max_tps:
        raise ValueError("no completed full-speed step before it to take the rate fraction of")
    return max(1.0, round(float(fraction) * max_tps, 1))


def _num(metrics: dict[str, JSONValue], key: str, default: float = 0.0) -> float:
    value = metrics.get(key)
    return float(value) if isinstance(value, int | float) else default


def rate_point(
    offered: float,
    metrics: dict[str, JSONValue],
    lag: Sequence[Sample],
    duration_s: float | None = None,
) -> RatePoint:
    lag_avg = metrics.get("schedule_lag_avg_ms")
    return RatePoint(
        offered=offered,
        achieved=_num(metrics, "tps"),
        latency_avg_ms=_num(metrics, "latency_avg_ms"),
        lag_avg_ms=float(lag_avg) if isinstance(lag_avg, int | float) else None,
        skipped=int(_num(metrics, "skipped")),
        lag_series_ms=tuple(p.value for p in lag),
        duration_s=duration_s,
    )


def step_rate_metrics(
    params: dict[str, JSONValue],
    metrics: dict[str, JSONValue],
    lag: Sequence[Sample],
) -> dict[str, JSONValue]:
    """`rate_met` and its reason for a fixed-rate step; the objective's verdict for any step
    with `slo` (a full-speed step has no offered rate to miss)."""
    out: dict[str, JSONValue] = {}
    rate = params.get("rate")
    met = True
    if isinstance(rate, int | float):
        duration = params.get("duration_s")
        seconds = float(duration) if isinstance(duration, int | float) else None
        verdict = rate_verdict(rate_point(float(rate), metrics, lag, seconds))
        met = verdict.met
        out.update(rate_offered=float(rate), rate_met=verdict.met, rate_verdict=verdict.reason)
    slo_text = params.get("slo")
    if isinstance(slo_text, str):
        out.update(slo_verdict(parse_slo(slo_text), metrics, met))
    return out


def curve_metrics(
    params: dict[str, JSONValue],
    metrics: dict[str, JSONValue],
    previous: Sequence[StepRecord],
) -> dict[str, JSONValue]:
    """For the last step of a curve: the saturation point, the knee and the highest rate
    meeting the objective, over every fixed-rate step of the same curve, with how each was
    found."""
    steps = [
        (s.params, s.metrics)
        for s in previous
        if s.workload == "pgbench"
        and s.status == "completed"
        and _same_curve(s.params, params)
        and isinstance(s.params.get("rate"), int | float)
    ]
    steps.append((params, metrics))
    offered = [_num(p, "rate") for p, _ in steps]
    # The knee on p99 when every point has it (what users feel), else on the average.
    knee_metric = (
        "latency_p99_ms" if all("latency_p99_ms" in m for _, m in steps) else "latency_avg_ms"
    )
    knee = find_knee(
        [(rate, _num(m, knee_metric)) for rate, (_, m) in zip(offered, steps, strict=True)]
    )
    # Saturation from each step's own stored verdict, so the curve and its steps agree.
    met = [(rate, m.get("rate_met") is True) for rate, (_, m) in zip(offered, steps, strict=True)]
    out: dict[str, JSONValue] = {
        "curve_rates": len(steps),
        "saturation_rate": highest_rate_meeting(met),
        "saturation_how": "the highest offered rate whose step met it: achieved (within the "
        "scatter of pgbench's random schedule), nothing skipped, schedule lag small and not "
        "growing",
        "knee_rate": knee.rate,
        "knee_latency_metric": knee_metric,
        "knee_how": knee.how,
    }
    if any("slo" in p for p, _ in steps):
        slo_met = [
            (rate, m.get("slo_met") is True) for rate, (_, m) in zip(offered, steps, strict=True)
        ]
        out["slo_max_rate"] = highest_rate_meeting(slo_met)
    return out
