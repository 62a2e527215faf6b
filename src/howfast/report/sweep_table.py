"""Emulated volumes side by side: TPS and p99 of each full-speed test against the latency the
volume added (asked, and measured), as a terminal table, a report table and a chart."""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table as RichTable

from howfast.analysis.emulation import SweepPoint, latency_sweep
from howfast.model import RunRecord
from howfast.report.charts import Chart, Trace
from howfast.report.tables import Cell, Table


def _variant(p: SweepPoint) -> str:
    text = f"+{p.asked_ms:g} ms"
    if p.measured_ms is not None:
        text += f" ({p.measured_ms:.2f} measured)"
    return text + (f", {p.iops:,} IOPS" if p.iops else "")


def _f(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def sweep_table(run: RunRecord) -> Table | None:
    points = latency_sweep(run)
    if not points:
        return None
    table = Table(f"latency-sweep-{run.id}", "TPS by added storage latency",
                  ["test", "volume", "TPS", "p99 ms"])  # fmt: skip
    for p in points:
        table.rows.append([Cell(p.test), Cell(_variant(p)), Cell(_f(p.tps, 1), numeric=True),
                           Cell(_f(p.p99_ms, 2), numeric=True)])  # fmt: skip
    return table


def sweep_charts(run: RunRecord) -> list[Chart]:
    """Per test (and IOPS cap): TPS and p99 against the added latency asked."""
    charts: list[Chart] = []
    groups: dict[tuple[str, int | None], list[SweepPoint]] = {}
    for p in latency_sweep(run):
        groups.setdefault((p.test, p.iops), []).append(p)
    for (test, iops), points in groups.items():
        if len(points) < 2:
            continue
        cap = f", {iops:,} IOPS" if iops else ""
        chart = Chart(f"latency-sweep-{run.id}-{len(charts)}", f"{test}{cap}: TPS and p99 by "
                      "added latency", "added latency (ms)", "TPS", "p99 latency (ms)")  # fmt: skip
        x: list[float | str] = [p.asked_ms for p in points]
        chart.traces.append(Trace("TPS", x, [p.tps for p in points]))
        chart.traces.append(Trace("p99", x, [p.p99_ms for p in points], axis="y2", dash="dot"))
        charts.append(chart)
    return charts


def sweep_parts(run: RunRecord) -> list[RenderableType]:
    points = latency_sweep(run)
    if not points:
        return []
    table = RichTable(title="TPS by added storage latency", title_justify="left")
    for name in ("test", "volume", "TPS", "p99 ms"):
        table.add_column(name, justify="right" if name in ("TPS", "p99 ms") else "left")
    for p in points:
        table.add_row(p.test, _variant(p), _f(p.tps, 1), _f(p.p99_ms, 2))
    return [table]
