"""A fleet run in the study's shape: per scenario, the measured tests as rows and the classes
as columns, TPS and latency in each cell; then fairness, shares and whether limits held.
One builder of report tables (HTML and Markdown) and one of terminal tables."""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table as RichTable
from rich.text import Text

from howfast.analysis.fleet import ClassFigures, fleet_figures, fleet_verdicts, is_fleet
from howfast.model import RunRecord
from howfast.report.charts import Chart, Trace
from howfast.report.tables import Cell, Table


def cell_text(f: ClassFigures) -> str:
    if not f.tps:
        return f"{f.completed}/{f.instances} completed"
    text = f"{f.total_tps:,.0f} TPS ({f.median_tps or 0:,.0f} each)"
    if f.p99_ms is not None:
        text += f", p99 {f.p99_ms:,.1f} ms"
    if f.completed < f.instances:
        text += f"; {f.instances - f.completed} failed"
    return text


def detail_text(f: ClassFigures) -> str:
    parts = [f"{f.instances} instance{'s' if f.instances != 1 else ''}"]
    if f.fairness is not None:
        parts.append(f"fairness {f.fairness:.3f}")
    if f.share is not None:
        parts.append(f"{f.share:.0%} of the total")
    if f.limits:
        parts.append("limits " + ", ".join(f"{k} {v:,}" for k, v in f.limits.items()))
    if f.storage_class:
        parts.append(f"StorageClass {f.storage_class}")
    return ", ".join(parts)


def _scenarios(figures: list[ClassFigures]) -> dict[str, list[ClassFigures]]:
    out: dict[str, list[ClassFigures]] = {}
    for f in figures:
        out.setdefault(f.scenario, []).append(f)
    return out


def fleet_tables(run: RunRecord) -> list[Table]:
    """Report tables (HTML, Markdown): one per scenario."""
    tables = []
    for scenario, figures in _scenarios(fleet_figures(run)).items():
        classes = list(dict.fromkeys(f.klass for f in figures))
        table = Table(f"fleet-{run.id}-{scenario}", f"Fleet, scenario {scenario}",
                      ["test", *classes])  # fmt: skip
        for test in dict.fromkeys(f.test for f in figures):
            row = [Cell(test)]
            for klass in classes:
                found = next((f for f in figures if f.test == test and f.klass == klass), None)
                if found is None:
                    row.append(Cell("–"))
                    continue
                notes = table.note([f"{klass}: {detail_text(found)}", *found.enforcement()])
                row.append(Cell(cell_text(found), notes, numeric=True))
            table.rows.append(row)
        tables.append(table)
    return tables


def fleet_parts(run: RunRecord) -> list[RenderableType]:
    """Terminal: the same tables, then the verdicts."""
    if not is_fleet(run):
        return []
    figures = fleet_figures(run)
    parts: list[RenderableType] = []
    for scenario, found in _scenarios(figures).items():
        classes = list(dict.fromkeys(f.klass for f in found))
        table = RichTable(title=f"fleet, scenario {scenario}", title_justify="left")
        table.add_column("test")
        for klass in classes:
            table.add_column(klass, justify="right")
        for test in dict.fromkeys(f.test for f in found):
            cells = []
            for klass in classes:
                f = next((f for f in found if f.test == test and f.klass == klass), None)
                cells.append("–" if f is None else f"{cell_text(f)}\n{detail_text(f)}")
            table.add_row(test, *cells)
        parts.append(table)
    parts += [Text(f"  {line}") for line in fleet_verdicts(figures)]
    return parts


def fleet_charts(run: RunRecord) -> list[Chart]:
    """Per scenario and test: each instance's TPS as a bar, the bars of a class one colour."""
    charts: list[Chart] = []
    figures = fleet_figures(run)
    for scenario, found in _scenarios(figures).items():
        for test in dict.fromkeys(f.test for f in found):
            chart = Chart(
                f"fleet-{run.id}-{scenario}-{len(charts)}",
                f"TPS per instance: {scenario}, {test}",
                "instance",
                "TPS",
            )
            for f in (f for f in found if f.test == test):
                names: list[float | str] = [f"{f.klass}-{n + 1}" for n in range(len(f.tps))]
                tps: list[float | None] = [round(v, 1) for v in f.tps]
                chart.traces.append(Trace(f.klass, names, tps, kind="bar", group=f.klass))
            charts.append(chart)
    return charts
