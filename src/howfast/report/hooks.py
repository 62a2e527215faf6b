"""What a workload shows of a run: its part of the terminal tables (`results show`, the end of
a run) and of the HTML and Markdown reports, declared by its plugin as `report =
"module:attribute"` (plugin/workload.py) and imported here, so that the reports name no
workload. A workload without one gets a generic table of its key metrics over the
repetitions (GenericReport).

Where the parts go (Slot), in both the terminal and the reports:
- PROBE: the storage probe (fio's profiles, pg_test_fsync's sync methods): in the terminal the
  first tables of a target, their warnings numbered together; in a report, the blocks of one
  "Storage probe" section, before the commit-rate ceiling;
- LOAD: loading data (pgbench -i): a line per load in the terminal, a section in a report;
- TESTS: the tests (pgbench's tables per mode, a generic table): in the terminal after the
  warm-ups, in a report after the comparison.

Each slot takes the workloads in their plugins' order (then workloads this howfast does not
know, as they first ran), so that a report reads in the same order whatever the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum

from rich.console import RenderableType
from rich.table import Table as RichTable

from howfast.analysis.groups import StepGroup
from howfast.analysis.metrics import KEY_METRICS, with_unit
from howfast.analysis.overview import Overview, Placed
from howfast.analysis.summary import TargetSummary
from howfast.model import JSONValue, RunRecord
from howfast.plugin.loading import load
from howfast.plugin.registry import find, plugins
from howfast.report import figures
from howfast.report.charts import ChartIds
from howfast.report.footnotes import Footnotes
from howfast.report.outline import Block, Section
from howfast.report.tables import Cell, Table, stat_cell


class Slot(Enum):
    PROBE = "probe"
    LOAD = "load"
    TESTS = "tests"


class WorkloadReport:
    """A workload's part of what is shown of a run. The defaults show nothing."""

    def terminal(self, slot: Slot, target: TargetSummary, notes: Footnotes) -> list[RenderableType]:
        """Its parts of one target's tables at `slot`; warnings as numbers in `notes`, which
        the slot's parts share and which are printed after them."""
        return []

    def run_terminal(self, run: RunRecord) -> list[RenderableType]:
        """Its parts of the run as a whole, after every target's tables (pgbench's rate
        curves)."""
        return []

    def sections(self, slot: Slot, view: Overview, charts: ChartIds) -> list[Section]:
        """Its sections of a report at `slot` (LOAD, TESTS); `charts` numbers its charts."""
        return []

    def probe_blocks(self, view: Overview, charts: ChartIds) -> list[Block]:
        """Its tables and charts in the report's "Storage probe" section."""
        return []

    def warmup_text(self, params: Mapping[str, JSONValue]) -> str:
        """A warm-up step, in the line that says it was left out of every figure."""
        return ""


class GenericReport(WorkloadReport):
    """A workload without a report part of its own: per target, a row per test with the
    mean ± 95% CI of each of its key metrics over the repetitions (none when it declares no
    key metric)."""

    def __init__(self, workload: str) -> None:
        self.workload = workload

    def _metrics(self) -> tuple[str, ...]:
        return KEY_METRICS.get(self.workload, ())

    def terminal(self, slot: Slot, target: TargetSummary, notes: Footnotes) -> list[RenderableType]:
        groups = target.groups_of(self.workload)
        names = self._metrics()
        if slot is not Slot.TESTS or not groups or not names:
            return []
        table = RichTable(
            title=f"{self.workload}: mean ± 95% CI over the repetitions", title_justify="left"
        )
        table.add_column("test")
        table.add_column("n", justify="right", no_wrap=True)
        for name in names:
            table.add_column(with_unit(name), justify="right")
        table.add_column("notes")
        own = Footnotes()
        for g in groups:
            refs = own.ranged_refs(tuple(_warnings(g, names)))
            table.add_row(
                g.label,
                str(g.n),
                *[figures.mean_ci(g.value(name), name) for name in names],
                (f"{g.failed} failed " if g.failed else "") + (refs or "ok"),
            )
        return [table, *own.lines()]

    def sections(self, slot: Slot, view: Overview, charts: ChartIds) -> list[Section]:
        placed = view.of(self.workload)
        names = self._metrics()
        if slot is not Slot.TESTS or not placed or not names:
            return []
        return [
            Section(
                f"tests-{self.workload}",
                self.workload,
                [generic_table(self.workload, placed, names)],
            )
        ]

    def warmup_text(self, params: Mapping[str, JSONValue]) -> str:
        plugin = find(self.workload)
        return plugin.label(params) if plugin is not None else self.workload


def _warnings(group: StepGroup, names: tuple[str, ...]) -> list[str]:
    found = [f"{with_unit(n)}: {t}" for n in names for t in group.warnings.get(n, [])]
    return found + group.step_warnings


def generic_table(workload: str, placed: list[Placed], names: tuple[str, ...]) -> Table:
    """A row per target and test: n and each metric's mean ± CI; what a step warned about
    goes with the first metric."""
    table = Table(f"tests-{workload}", workload, ["target", "test", "n", *map(with_unit, names)])
    for p in placed:
        g = p.group
        failed = [f"{g.failed} of {len(g.steps)} repetitions failed"] if g.failed else []
        cells = [
            stat_cell(table, g, name, failed + g.step_warnings if i == 0 else [])
            for i, name in enumerate(names)
        ]
        table.rows.append(
            [Cell(p.target.title), Cell(g.label), Cell(str(g.n), numeric=True), *cells]
        )
    return table


def report_for(workload: str) -> WorkloadReport:
    """The report part of `workload`'s plugin; the generic one for a workload that declares
    none or that this howfast does not know."""
    plugin = find(workload)
    if plugin is None or plugin.report is None:
        return GenericReport(workload)
    found = load(plugin.report)
    if not isinstance(found, WorkloadReport):
        raise TypeError(f"{plugin.report} is not a WorkloadReport")
    return found


def in_order(workloads: Iterable[str]) -> list[str]:
    """These workloads once each: the known ones in their plugins' order, then the others as
    they come."""
    given = list(dict.fromkeys(workloads))
    known = [name for name in plugins() if name in given]
    return known + [name for name in given if name not in known]


def reports_for(workloads: Iterable[str]) -> list[WorkloadReport]:
    return [report_for(name) for name in in_order(workloads)]
