"""Fixed-rate steps of a run gathered into curves (one per target and curve: mode, scripts,
client count and settings, as rate_verdicts.curve_key says), for the latency-under-load table
and chart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from howfast.analysis.rate_verdicts import CURVE_METRICS, curve_key, in_curve
from howfast.model import JSONValue, StepRecord

CURVE_SUMMARY = ("saturation_rate", "knee_rate", "knee_how", "knee_latency_metric", "slo_max_rate")
assert set(CURVE_SUMMARY) <= CURVE_METRICS


@dataclass(frozen=True)
class RateRow:
    offered: float | None  # None: the full-speed step
    achieved: float | None
    latency_avg_ms: float | None
    latency_p99_ms: float | None
    lag_avg_ms: float | None
    rate_met: bool | None
    slo_met: bool | None
    note: str


@dataclass
class RateCurve:
    target: str
    mode: str
    clients: int | None
    slo: str | None = None
    rows: list[RateRow] = field(default_factory=list)
    summary: dict[str, JSONValue] = field(default_factory=dict)  # saturation, knee...


def _num(m: dict[str, JSONValue], key: str) -> float | None:
    v = m.get(key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _flag(m: dict[str, JSONValue], key: str) -> bool | None:
    v = m.get(key)
    return v if isinstance(v, bool) else None


def rate_curves(steps: Sequence[StepRecord]) -> list[RateCurve]:
    """The curves of these steps (a run's pgbench steps), in the order they ran."""
    curves: dict[tuple[str, str], RateCurve] = {}
    for step in steps:
        p = step.all_params
        if not in_curve(p):
            continue
        key = (step.target, curve_key(p))
        clients = p.get("clients")
        curve = curves.setdefault(
            key,
            RateCurve(
                step.target, str(p.get("mode")), clients if isinstance(clients, int) else None
            ),
        )
        m = step.metrics
        if isinstance(p.get("slo"), str):
            curve.slo = str(p["slo"])
        note = str(m.get("rate_verdict") or (step.error or "").split("\n")[0])
        if p.get("curve_role") == "max":
            note = "full speed: the curve's maximum"
        rate = p.get("rate")
        curve.rows.append(
            RateRow(
                offered=float(rate) if isinstance(rate, int | float) else None,
                achieved=_num(m, "tps"),
                latency_avg_ms=_num(m, "latency_avg_ms"),
                latency_p99_ms=_num(m, "latency_p99_ms"),
                lag_avg_ms=_num(m, "schedule_lag_avg_ms"),
                rate_met=_flag(m, "rate_met"),
                slo_met=_flag(m, "slo_met"),
                note=note if step.status == "completed" else f"{step.status}: {note}",
            )
        )
        curve.summary.update({k: m[k] for k in CURVE_SUMMARY if k in m})
    # A single fixed-rate step is a verdict, not a curve: it stays in the mode tables.
    return [c for c in curves.values() if len(c.rows) > 1]
