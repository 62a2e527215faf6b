"""The toy's part of what is shown of a run: a table of its tests (rows summed per second by
rows) in the terminal, and a "Toy" section in a report."""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table as RichTable

from howfast.analysis.overview import Overview
from howfast.analysis.summary import TargetSummary
from howfast.report import figures
from howfast.report.charts import ChartIds
from howfast.report.footnotes import Footnotes
from howfast.report.hooks import Slot, WorkloadReport
from howfast.report.outline import Section
from howfast.report.tables import Cell, Table, stat_cell

NAME = "toy"


class ToyReport(WorkloadReport):
    def terminal(self, slot: Slot, target: TargetSummary, notes: Footnotes) -> list[RenderableType]:
        groups = target.groups_of(NAME)
        if slot is not Slot.TESTS or not groups:
            return []
        table = RichTable(title="toy: rows summed per second", title_justify="left")
        for column in ("rows", "n", "rows/s", "ms per sum"):
            table.add_column(column, justify="right")
        for g in groups:
            table.add_row(
                str(g.params.get("rows")),
                str(g.n),
                figures.mean_ci(g.value("toy_rows_per_s"), "toy_rows_per_s"),
                figures.mean_ci(g.value("toy_query_ms"), "toy_query_ms"),
            )
        return [table]

    def sections(self, slot: Slot, view: Overview, charts: ChartIds) -> list[Section]:
        placed = view.of(NAME)
        if slot is not Slot.TESTS or not placed:
            return []
        table = Table("toy", "Toy: rows summed per second", ["target", "rows", "n", "rows/s"])
        for p in placed:
            g = p.group
            table.rows.append(
                [
                    Cell(p.target.title),
                    Cell(str(g.params.get("rows")), numeric=True),
                    Cell(str(g.n), numeric=True),
                    stat_cell(table, g, "toy_rows_per_s", g.step_warnings),
                ]
            )
        return [Section("toy", "Toy", [table])]


REPORT = ToyReport()
