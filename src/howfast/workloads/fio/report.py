"""fio's part of what is shown of a run (report/hooks.py): the storage probe's table of
profiles for each target in the terminal (a row per run, or over the repetitions when a
profile repeated); in a report, its table in the "Storage probe" section with IOPS by profile
and the latency at queue depth 1."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.console import RenderableType
from rich.table import Table as RichTable

from howfast.analysis.groups import StepGroup
from howfast.analysis.metrics import metric, with_unit
from howfast.analysis.overview import Overview, Placed
from howfast.analysis.summary import TargetSummary
from howfast.model import JSONValue, StepRecord
from howfast.report import figures
from howfast.report.charts import Chart, ChartIds, Trace, by_target, error_of, mean_of
from howfast.report.footnotes import Footnotes
from howfast.report.hooks import Slot, WorkloadReport
from howfast.report.outline import Block
from howfast.report.tables import Cell, Table, cell_text, stat_cell
from howfast.report.terminal import fmt, status_cell
from howfast.workloads.fio.plan import FIO_FIGURES

NAME = "fio"
QD1_METRICS = tuple(name for name in FIO_FIGURES if "_lat_" in name)  # the latency ones


@dataclass(frozen=True)
class FioRow:
    """One fio step as a table row. Latencies in ms; MB/s is read + write."""

    profile: str
    repetition: int | None
    status: str
    error: str | None
    read_iops: float | None
    write_iops: float | None
    mbps: float | None
    read_lat_avg_ms: float | None
    read_lat_p99_ms: float | None
    write_lat_avg_ms: float | None
    write_lat_p99_ms: float | None
    sync_lat_avg_ms: float | None
    sync_lat_p99_ms: float | None
    warnings: tuple[str, ...]


def _num(metrics: Mapping[str, JSONValue], key: str) -> float | None:
    value = metrics.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _total(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def fio_row(step: StepRecord) -> FioRow:
    m = step.metrics
    rep = step.all_params.get("repetition")
    return FioRow(
        profile=str(step.all_params.get("profile", "?")),
        repetition=rep if isinstance(rep, int) else None,
        status=step.status,
        error=step.error,
        read_iops=_num(m, "read_iops"),
        write_iops=_num(m, "write_iops"),
        mbps=_total(_num(m, "read_mbps"), _num(m, "write_mbps")),
        read_lat_avg_ms=_num(m, "read_lat_avg_ms"),
        read_lat_p99_ms=_num(m, "read_lat_p99_ms"),
        write_lat_avg_ms=_num(m, "write_lat_avg_ms"),
        write_lat_p99_ms=_num(m, "write_lat_p99_ms"),
        sync_lat_avg_ms=_num(m, "sync_lat_avg_ms"),
        sync_lat_p99_ms=_num(m, "sync_lat_p99_ms"),
        warnings=tuple(step.warnings),
    )


# -- the terminal ------------------------------------------------------------------------------


def fio_stats_table(groups: list[StepGroup], notes: Footnotes) -> RichTable:
    """fio profiles over their repetitions: mean ± 95% CI."""
    columns = {
        "read_iops": "read IOPS",
        "write_iops": "write IOPS",
        "read_lat_avg_ms": "read lat",
        "write_lat_avg_ms": "write lat",
        "sync_lat_avg_ms": "sync lat",
    }
    names = tuple(columns)
    table = RichTable(
        title="storage probe (fio): mean ± 95% CI over the repetitions; average latency in ms",
        title_justify="left",
    )
    table.add_column("profile", no_wrap=True)
    table.add_column("n", justify="right", no_wrap=True)
    for header in columns.values():
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("notes")
    for g in groups:
        warnings = [
            f"{with_unit(n)}: {t}" for n, texts in g.warnings.items() if n in names for t in texts
        ]
        refs = notes.ranged_refs(tuple(warnings + g.step_warnings))
        table.add_row(
            str(g.params.get("profile", "?")),
            str(g.n),
            *[figures.mean_ci(g.value(name), name) for name in names],
            (f"{g.failed} failed " if g.failed else "") + (refs or "ok"),
        )
    return table


def pair(avg: float | None, p99: float | None) -> str:
    """'0.138 / 1.79': average and p99 latency in ms in one cell."""
    if avg is None and p99 is None:
        return "–"
    return f"{fmt(avg, 3)} / {fmt(p99, 3)}"


def fio_rows_table(rows: list[FioRow], notes: Footnotes) -> RichTable:
    table = RichTable(title="storage probe (fio); latency in ms, avg / p99", title_justify="left")
    table.add_column("profile")
    for name in ("read IOPS", "write IOPS", "MB/s", "read lat", "write lat", "sync lat"):
        table.add_column(name, justify="right")
    table.add_column("notes")
    for r in rows:
        name = r.profile + (f" #{r.repetition}" if r.repetition and r.repetition > 1 else "")
        table.add_row(
            name,
            fmt(r.read_iops, 0, thousands=True),
            fmt(r.write_iops, 0, thousands=True),
            fmt(r.mbps, 1, thousands=True),
            pair(r.read_lat_avg_ms, r.read_lat_p99_ms),
            pair(r.write_lat_avg_ms, r.write_lat_p99_ms),
            pair(r.sync_lat_avg_ms, r.sync_lat_p99_ms),
            status_cell(r.status, r.error, notes.refs(r.warnings)),
        )
    return table


# -- a report -------------------------------------------------------------------------------


def fio_table(placed: Sequence[Placed]) -> Table:
    columns = ["target", "profile", "n"] + [with_unit(n) for n in FIO_FIGURES]
    table = Table("fio", "Storage probe (fio)", columns)
    for p in placed:
        g = p.group
        failed = [f"{g.failed} of {len(g.steps)} runs failed"] if g.failed else []
        # The step's own warnings go with its headline figure: read IOPS, else write IOPS.
        headline = "read_iops" if g.value("read_iops") else "write_iops"
        cells = [
            stat_cell(table, g, name, failed + g.step_warnings if name == headline else [])
            for name in FIO_FIGURES
        ]
        table.rows.append(
            [
                Cell(p.target.title),
                Cell(cell_text(g.params.get("profile"))),
                Cell(str(g.n), numeric=True),
                *cells,
            ]
        )
    return table


def fio_iops(placed: list[Placed], ids: ChartIds) -> Chart:
    chart = Chart(ids(), "fio: IOPS by profile (mean ± 95% CI)", "profile", "IOPS")
    chart.x_categories = True
    for target, ps in by_target(placed):
        for name, direction in (("read_iops", "read"), ("write_iops", "write")):
            with_value = [p for p in ps if p.group.value(name)]
            if with_value:
                chart.traces.append(
                    Trace(
                        f"{target.title} {direction}",
                        [str(p.group.params.get("profile")) for p in with_value],
                        [mean_of(p.group, name) for p in with_value],
                        kind="bar",
                        error=[error_of(p.group, name) for p in with_value],
                        group=target.key,
                    )
                )
    return chart


def fio_qd1_latency(placed: list[Placed], ids: ChartIds) -> Chart | None:
    """Latency at queue depth 1 (profiles named *qd1, and wal-fsync: one write at a time)."""
    qd1 = [
        p
        for p in placed
        if str(p.group.params.get("profile", "")).endswith("qd1")
        or p.group.params.get("profile") == "wal-fsync"
    ]
    if not qd1:
        return None
    chart = Chart(ids(), "fio: latency at queue depth 1 (mean ± 95% CI)", "", "latency (ms)")
    chart.x_categories = True
    for target, ps in by_target(qd1):
        x: list[float | str] = []
        y: list[float | None] = []
        error: list[float | None] = []
        for p in ps:
            for name in QD1_METRICS:
                if p.group.value(name):
                    x.append(f"{p.group.params.get('profile')} {metric(name).label}")
                    y.append(mean_of(p.group, name))
                    error.append(error_of(p.group, name))
        if x:
            chart.traces.append(Trace(target.title, x, y, "bar", error=error, group=target.key))
    return chart if chart.traces else None


class FioReport(WorkloadReport):
    def terminal(self, slot: Slot, target: TargetSummary, notes: Footnotes) -> list[RenderableType]:
        """Over the repetitions when a profile ran more than once, else a row per run."""
        if slot is not Slot.PROBE:
            return []
        groups = target.groups_of(NAME)
        if any(len(g.steps) > 1 for g in groups):
            return [fio_stats_table(groups, notes)]
        rows = [fio_row(s) for s in target.steps if s.workload == NAME]
        return [fio_rows_table(rows, notes)] if rows else []

    def probe_blocks(self, view: Overview, charts: ChartIds) -> list[Block]:
        placed = view.of(NAME)
        if not placed:
            return []
        drawn = [fio_iops(placed, charts)]
        qd1 = fio_qd1_latency(placed, charts)
        return [fio_table(placed), *drawn, *([qd1] if qd1 is not None else [])]


REPORT = FioReport()
