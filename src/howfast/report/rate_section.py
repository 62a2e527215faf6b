"""The report's latency-under-load section: per curve a table, and per mode and client count a
chart of latency against offered rate, one line per target, with each knee and the latency
objective marked."""

from __future__ import annotations

from howfast.analysis.overview import Overview
from howfast.analysis.rate_curves import RateCurve, rate_curves
from howfast.rates import parse_slo
from howfast.report.charts import Chart, Trace
from howfast.report.tables import Cell, Table


def _f(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _yes(value: bool | None) -> str:
    return "–" if value is None else ("yes" if value else "no")


def curve_table(curve: RateCurve, title: str, table_id: str) -> Table:
    columns = [
        "offered (tx/s)",
        "achieved TPS",
        "avg latency (ms)",
        "p99 latency (ms)",
        "schedule lag avg (ms)",
        "rate met",
    ]
    if curve.slo:
        columns.append(f"SLO {curve.slo} met")
    columns.append("why")
    table = Table(table_id, title, columns)
    for r in curve.rows:
        cells = [
            Cell("full speed" if r.offered is None else _f(r.offered, 1), numeric=True),
            Cell(_f(r.achieved, 1), numeric=True),
            Cell(_f(r.latency_avg_ms, 3), numeric=True),
            Cell(_f(r.latency_p99_ms, 3), numeric=True),
            Cell(_f(r.lag_avg_ms, 3), numeric=True),
            Cell(_yes(r.rate_met)),
        ]
        if curve.slo:
            cells.append(Cell(_yes(r.slo_met)))
        cells.append(Cell(r.note))
        table.rows.append(cells)
    return table


def _summary_text(curve: RateCurve, title: str) -> str:
    s = curve.summary
    parts = [f"{title}:"]
    sat = s.get("saturation_rate")
    parts.append(
        f"saturation point {_f(float(sat), 1)} tx/s (the highest offered rate still met)"
        if isinstance(sat, int | float)
        else "no offered rate was met"
    )
    knee = s.get("knee_rate")
    parts.append(
        f"knee {_f(float(knee), 1)} tx/s"
        if isinstance(knee, int | float)
        else "no knee in the tested range"
    )
    if s.get("knee_how"):
        parts.append(f"({s['knee_how']})")
    top = s.get("slo_max_rate")
    if "slo_max_rate" in s:
        parts.append(
            f"highest rate meeting {curve.slo}: "
            + (f"{_f(float(top), 1)} tx/s" if isinstance(top, int | float) else "none")
        )
    return " ".join(parts) + "."


def curve_chart(curves: list[tuple[str, RateCurve]], chart_id: str) -> Chart:
    first = curves[0][1]
    metric = str(first.summary.get("knee_latency_metric") or "latency_p99_ms")
    p99 = metric == "latency_p99_ms"
    chart = Chart(
        chart_id,
        f"Latency vs offered load: pgbench {first.mode}, {first.clients} clients",
        "offered rate (transactions/s)",
        f"{'p99' if p99 else 'average'} latency (ms)",
    )
    xs: list[float] = []
    for title, curve in curves:
        rows = [r for r in curve.rows if r.offered is not None]
        x = [float(r.offered) for r in rows if r.offered is not None]
        y = [r.latency_p99_ms if p99 else r.latency_avg_ms for r in rows]
        xs += x
        chart.traces.append(Trace(title, list(x), y, group=title))
        knee = curve.summary.get("knee_rate")
        if isinstance(knee, int | float) and float(knee) in x:
            at = y[x.index(float(knee))]
            chart.traces.append(
                Trace(f"knee {title}", [float(knee)], [at], group=title, dash="dot")
            )
    slo = next((c.slo for _, c in curves if c.slo), None)
    if slo and xs:
        objective = parse_slo(slo)
        if objective.metric == metric:
            chart.traces.append(
                Trace(f"SLO {slo}", [min(xs), max(xs)], [objective.limit_ms] * 2, dash="dash")
            )
    return chart


def rate_blocks(view: Overview, workload: str) -> list[Table | Chart | str]:
    """The rate curves of `workload`'s steps (pgbench's); nothing when no run has one."""
    found: list[tuple[str, RateCurve]] = []
    several = len(view.runs) > 1
    for run in view.runs:
        for curve in rate_curves([s for s in run.steps if s.workload == workload]):
            found.append((f"run {run.id} {curve.target}" if several else curve.target, curve))
    if not found:
        return []
    blocks: list[Table | Chart | str] = [
        "Fixed offered rates (pgbench --rate). A rate is met when it was achieved (within the "
        "scatter of pgbench's random schedule), nothing was skipped and the schedule lag stayed "
        "small and did not grow; the knee is the last rate before latency rises for good above "
        "1.5x its low-rate baseline. See docs/latency-under-load.md."
    ]
    by_shape: dict[tuple[str, int | None], list[tuple[str, RateCurve]]] = {}
    for n, (title, curve) in enumerate(found, start=1):
        blocks.append(
            curve_table(
                curve, f"{title}: pgbench {curve.mode}, {curve.clients} clients", f"rate-table-{n}"
            )
        )
        if curve.summary:
            blocks.append(_summary_text(curve, title))
        by_shape.setdefault((curve.mode, curve.clients), []).append((title, curve))
    for n, curves in enumerate(by_shape.values(), start=1):
        blocks.append(curve_chart(curves, f"rate-chart-{n}"))
    return blocks
