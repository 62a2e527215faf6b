"""Terminal tables of latency under load: one per rate curve."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from howfast.analysis.rate_curves import RateCurve, rate_curves
from howfast.model import StepRecord


def _f(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _yes(value: bool | None) -> str:
    return "–" if value is None else ("yes" if value else "NO")


def curve_table(curve: RateCurve) -> RenderableType:
    table = Table(
        title=f"latency under load: {curve.target}, pgbench {curve.mode}, {curve.clients} clients",
        title_justify="left",
    )
    for name in ("offered tx/s", "achieved TPS", "avg ms", "p99 ms", "lag avg ms", "met"):
        table.add_column(name, justify="right")
    if curve.slo:
        table.add_column(f"SLO {curve.slo}", justify="right")
    table.add_column("why")
    for r in curve.rows:
        cells = [
            "full speed" if r.offered is None else _f(r.offered, 1),
            _f(r.achieved, 1),
            _f(r.latency_avg_ms, 3),
            _f(r.latency_p99_ms, 3),
            _f(r.lag_avg_ms, 3),
            _yes(r.rate_met),
        ]
        if curve.slo:
            cells.append(_yes(r.slo_met))
        table.add_row(*cells, r.note)
    parts: list[RenderableType] = [table]
    s = curve.summary
    if s:
        lines = [
            f"saturation point: {_f(_num(s.get('saturation_rate')), 1)} tx/s "
            "(the highest offered rate still met)",
            f"knee: {_f(_num(s.get('knee_rate')), 1)} tx/s — {s.get('knee_how', '')}",
        ]
        if "slo_max_rate" in s:
            lines.append(
                f"highest rate meeting {curve.slo}: {_f(_num(s.get('slo_max_rate')), 1)} tx/s"
            )
        parts += [Text(line) for line in lines]
    return Group(*parts)


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def rate_parts(steps: Sequence[StepRecord]) -> list[RenderableType]:
    """A table per rate curve of these steps (a run's pgbench steps); nothing without one."""
    return [curve_table(c) for c in rate_curves(steps)]
