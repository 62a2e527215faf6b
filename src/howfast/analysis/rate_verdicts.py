"""Verdicts of fixed-rate pgbench steps, derived when a run is read: whether each offered
rate was met, the latency objective, and a curve's saturation point, knee and highest rate
meeting the objective. Also what makes two steps part of the same curve, which the runner
uses too (a rate fraction is taken of the maximum TPS of the same curve).

Pure functions over params, metrics and the lag series (docs/latency-under-load.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from howfast.analysis.latency_curve import (
    RatePoint,
    find_knee,
    highest_rate_meeting,
    rate_verdict,
    slo_verdict,
)
from howfast.model import JSONValue, Sample
from howfast.rates import parse_slo

# The params that make fixed-rate steps (and their full-speed step) one curve, on a target.
CURVE_PARAMS = ("mode", "scripts", "clients", "settings")

# What this module derives, per step and on a curve's last step: replaced when a step stored
# with frozen verdicts is read.
RATE_METRICS = frozenset(
    {"rate_offered", "rate_met", "rate_verdict"}
    | {"slo", "slo_metric", "slo_limit_ms", "slo_value_ms", "slo_met"}
)
CURVE_METRICS = frozenset(
    {"curve_rates", "saturation_rate", "saturation_how", "knee_rate", "knee_latency_metric"}
    | {"knee_how", "slo_max_rate"}
)


def curve_key(params: Mapping[str, JSONValue]) -> str:
    """Which curve a step belongs to on its target: equal keys, same curve."""
    return json.dumps([params.get(k) for k in CURVE_PARAMS], sort_keys=True, default=str)


def in_curve(params: Mapping[str, JSONValue]) -> bool:
    """A fixed-rate step or a curve's full-speed step, not a warm-up (of pgbench, whose
    analysis and report parts ask)."""
    return (params.get("rate") is not None or params.get("curve_role") == "max") and not params.get(
        "warmup"
    )


def _num(metrics: Mapping[str, JSONValue], key: str, default: float = 0.0) -> float:
    value = metrics.get(key)
    return float(value) if isinstance(value, int | float) else default


def rate_point(
    offered: float,
    metrics: Mapping[str, JSONValue],
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
    params: Mapping[str, JSONValue],
    metrics: Mapping[str, JSONValue],
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
        out.update(slo_verdict(parse_slo(slo_text), dict(metrics), met))
    return out


def rate_warning(params: Mapping[str, JSONValue], verdicts: Mapping[str, JSONValue]) -> str | None:
    if verdicts.get("rate_met") is not False:
        return None
    return f"the offered rate {params['rate']}/s was not met: {verdicts['rate_verdict']}"


def curve_metrics(
    steps: Sequence[tuple[Mapping[str, JSONValue], Mapping[str, JSONValue]]],
) -> dict[str, JSONValue]:
    """For the last step of a curve: the saturation point, the knee and the highest rate
    meeting the objective, over the (params, metrics) of every completed fixed-rate step of
    the curve (metrics with their verdicts), with how each was found."""
    offered = [_num(p, "rate") for p, _ in steps]
    # The knee on p99 when every point has it (what users feel), else on the average.
    knee_metric = (
        "latency_p99_ms" if all("latency_p99_ms" in m for _, m in steps) else "latency_avg_ms"
    )
    knee = find_knee(
        [(rate, _num(m, knee_metric)) for rate, (_, m) in zip(offered, steps, strict=True)]
    )
    # Saturation from each step's own verdict, so the curve and its steps agree.
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
