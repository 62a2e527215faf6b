"""pgbench-init's part of what is shown of a run (report/hooks.py): a line per load in the
terminal; in a report, the "Load (pgbench -i)" section: load time and its phases, and a chart
of the phases."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import RenderableType
from rich.text import Text

from howfast.analysis.metrics import metric, with_unit
from howfast.analysis.overview import Overview, Placed
from howfast.analysis.summary import TargetSummary
from howfast.errortext import error_summary
from howfast.model import StepRecord
from howfast.report.charts import Chart, ChartIds, Trace, mean_of
from howfast.report.footnotes import Footnotes
from howfast.report.hooks import Slot, WorkloadReport
from howfast.report.outline import Section
from howfast.report.tables import Cell, Table, cell_text, stat_cell
from howfast.report.terminal import fmt
from howfast.workloads.pgbench.init.plan import INIT_PHASES

NAME = "pgbench-init"


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def init_line(step: StepRecord) -> str:
    m = step.metrics
    if step.status != "completed":
        return f"load (pgbench -i): {step.status}: {error_summary(step.error)}"
    scale = step.all_params.get("scale")
    phases = [
        f"{key.removesuffix('_s').replace('_', ' ')} {float(v):.2f}"
        for key, v in m.items()
        if key.endswith("_s") and key != "init_total_s" and isinstance(v, int | float)
    ]
    size = m.get("db_size_bytes")
    text = f"load (pgbench -i, scale {scale}): {fmt(_num(m.get('init_total_s')))} s"
    if phases:
        text += " (" + ", ".join(phases) + ")"
    if isinstance(size, int):
        text += f", database {size / 1024**2:,.0f} MiB"
    return text


def init_table(placed: Sequence[Placed]) -> Table:
    columns = ["target", "scale", with_unit("init_total_s")]
    columns += [with_unit(n) for n in INIT_PHASES] + ["database size"]
    table = Table("pgbench-init", "pgbench -i: load time and its phases", columns)
    for p in placed:
        g = p.group
        failed = [f"{g.failed} load(s) failed"] if g.failed else []
        table.rows.append(
            [
                Cell(p.target.title),
                Cell(cell_text(g.params.get("scale")), numeric=True),
                stat_cell(table, g, "init_total_s", failed + g.step_warnings),
                *[stat_cell(table, g, name) for name in INIT_PHASES],
                stat_cell(table, g, "db_size_bytes"),
            ]
        )
    return table


def init_phases(placed: list[Placed], ids: ChartIds) -> Chart:
    chart = Chart(
        ids(), "pgbench -i: load time by phase", "time (s)", "", bars="stack", horizontal=True
    )
    chart.x_categories = True
    labelled = [(f"{p.target.title} (scale {p.group.params.get('scale')})", p) for p in placed]
    for phase in INIT_PHASES:
        chart.traces.append(
            Trace(
                metric(phase).label,
                [label for label, _ in labelled],
                [mean_of(p.group, phase) for _, p in labelled],
                kind="bar",
            )
        )
    return chart


class PgbenchInitReport(WorkloadReport):
    def terminal(self, slot: Slot, target: TargetSummary, notes: Footnotes) -> list[RenderableType]:
        if slot is not Slot.LOAD:
            return []
        return [Text(init_line(step)) for step in target.steps_of(NAME)]

    def sections(self, slot: Slot, view: Overview, charts: ChartIds) -> list[Section]:
        placed = view.of(NAME)
        if slot is not Slot.LOAD or not placed:
            return []
        loaded = [p for p in placed if p.group.n]
        drawn = [init_phases(loaded, charts)] if loaded else []
        return [Section("load", "Load (pgbench -i)", [init_table(placed), *drawn])]


REPORT = PgbenchInitReport()
