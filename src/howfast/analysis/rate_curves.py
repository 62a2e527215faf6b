"""Fixed-rate steps of a run gathered into curves (one per target, mode and client count),
for the latency-under-load table and chart."""

from __future__ import annotations

from dataclasses import dataclass, field

from howfast.model import JSONValue, RunRecord


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


def rate_curves(run: RunRecord) -> list[RateCurve]:
    curves: dict[tuple[str, str, object, str], RateCurve] = {}
    for step in run.steps:
        p = step.params
        in_curve = p.get("rate") is not None or p.get("curve_role") == "max"
        if step.workload != "pgbench" or not in_curve or p.get("warmup"):
            continue
        key = (step.target, str(p.get("mode")), p.get("clients"), str(p.get("settings")))
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
        for k in (
            "saturation_rate",
            "knee_rate",
            "knee_how",
            "knee_latency_metric",
            "slo_max_rate",
        ):
            if k in m:
                curve.summary[k] = m[k]
    # A single fixed-rate step is a verdict, not a curve: it stays in the mode tables.
    return [c for c in curves.values() if len(c.rows) > 1]
