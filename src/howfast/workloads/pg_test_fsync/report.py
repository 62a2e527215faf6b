"""pg_test_fsync's part of what is shown of a run (report/hooks.py): the wal_sync_methods it
timed, fastest marked, in the storage probe of each target (terminal) and in the report's
"Storage probe" section."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rich.console import RenderableType
from rich.table import Table as RichTable
from rich.text import Text

from howfast.analysis.overview import Overview
from howfast.analysis.summary import TargetSummary
from howfast.errortext import error_summary
from howfast.model import JSONValue, StepRecord
from howfast.report import figures
from howfast.report.charts import ChartIds
from howfast.report.footnotes import Footnotes
from howfast.report.hooks import Slot, WorkloadReport
from howfast.report.outline import Block
from howfast.report.tables import Cell, Table
from howfast.report.terminal import fmt, status_cell
from howfast.walsync import WAL_SYNC_METHODS

NAME = "pg_test_fsync"
TITLE = "pg_test_fsync: one 8 kB write, then sync"


@dataclass(frozen=True)
class SyncMethod:
    """One wal_sync_method as pg_test_fsync measured it with one 8 kB write per sync."""

    method: str
    ops_s: float
    usecs: float


@dataclass(frozen=True)
class FsyncResult:
    status: str
    error: str | None
    methods: tuple[SyncMethod, ...]
    best: str | None
    warnings: tuple[str, ...]


def _num(metrics: Mapping[str, JSONValue], key: str) -> float | None:
    value = metrics.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def fsync_result(step: StepRecord) -> FsyncResult:
    methods = []
    for method in WAL_SYNC_METHODS:
        ops, usecs = _num(step.metrics, f"{method}_ops_s"), _num(step.metrics, f"{method}_usecs")
        if ops is not None and usecs is not None:
            methods.append(SyncMethod(method, ops, usecs))
    best = step.metrics.get("best_wal_sync_method")
    return FsyncResult(
        status=step.status,
        error=step.error,
        methods=tuple(methods),
        best=str(best) if best else None,
        warnings=tuple(step.warnings),
    )


def fsync_parts(result: FsyncResult, notes: Footnotes) -> list[RenderableType]:
    refs = notes.refs(result.warnings)
    if result.status != "completed" or not result.methods:
        return [Text(f"pg_test_fsync: {status_cell(result.status, result.error, refs)}")]
    title = TITLE + (f" {refs}" if refs else "")
    table = RichTable(title=title, title_justify="left")
    table.add_column("wal_sync_method")
    table.add_column("ops/s", justify="right")
    table.add_column("µs per op", justify="right")
    for m in result.methods:
        best = " (best)" if m.method == result.best else ""
        table.add_row(m.method + best, fmt(m.ops_s, 0, thousands=True), fmt(m.usecs, 0))
    return [table]


def fsync_table(view: Overview) -> Table:
    table = Table("pg-test-fsync", TITLE, ["target", "wal_sync_method", "ops/s", "µs per op"])
    for target, step in view.steps_of(NAME):
        result = fsync_result(step)
        notes = table.note(list(result.warnings))
        if result.status != "completed" or not result.methods:
            error = error_summary(result.error)
            table.rows.append(
                [Cell(target.title), Cell(f"{result.status} {error}".strip(), notes)]
                + [Cell(figures.DASH)] * 2
            )
        for m in result.methods:
            best = " (best)" if m.method == result.best else ""
            table.rows.append(
                [
                    Cell(target.title),
                    Cell(m.method + best, notes),
                    Cell(f"{m.ops_s:,.0f}", numeric=True),
                    Cell(f"{m.usecs:,.0f}", numeric=True),
                ]
            )
    return table


class PgTestFsyncReport(WorkloadReport):
    def terminal(self, slot: Slot, target: TargetSummary, notes: Footnotes) -> list[RenderableType]:
        if slot is not Slot.PROBE:
            return []
        steps = [s for s in target.steps if s.workload == NAME]
        return [part for s in steps for part in fsync_parts(fsync_result(s), notes)]

    def probe_blocks(self, view: Overview, charts: ChartIds) -> list[Block]:
        return [fsync_table(view)] if view.steps_of(NAME) else []


REPORT = PgTestFsyncReport()
