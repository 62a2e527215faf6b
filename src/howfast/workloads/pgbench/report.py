"""pgbench's part of what is shown of a run (report/hooks.py): a table per mode (one row per
step, or over the repetitions when any test repeated) for each target in the terminal, and in
a report a section per mode (table, TPS and latency by clients) and the latency-under-load
section of its rate curves (report/rate_section.py, rate_table.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from rich.console import RenderableType
from rich.table import Table as RichTable

from howfast.analysis.groups import StepGroup
from howfast.analysis.metrics import with_unit
from howfast.analysis.overview import Overview, Placed
from howfast.analysis.steady import steady_state
from howfast.analysis.summary import TargetSummary
from howfast.analysis.trials import run_trials
from howfast.model import JSONValue, RunRecord, StepRecord
from howfast.rates import rate_label
from howfast.report import events_view, figures, rate_section, rate_table, trials_view
from howfast.report.charts import (
    Chart,
    ChartIds,
    Trace,
    by_target,
    clients_of,
    error_of,
    mean_of,
    wide,
)
from howfast.report.footnotes import Footnotes
from howfast.report.hooks import Slot, WorkloadReport
from howfast.report.outline import Section
from howfast.report.tables import Cell, Table, cell_text, stat_cell
from howfast.report.terminal import fmt

NAME = "pgbench"
PERCENTILES = (("latency_p50_ms", "p50"), ("latency_p95_ms", "p95"), ("latency_p99_ms", "p99"))


@dataclass(frozen=True)
class ModeRow:
    """One step as pgbench printed it."""

    clients: int | None
    repetition: int | None
    status: str
    tps: float | None
    latency_avg_ms: float | None
    latency_p99_ms: float | None
    conn_time_ms: float | None
    warnings: int
    # From the per-second series when they were read (analysis/steady.py)
    steady_tps: float | None = None
    steady_skipped_s: float | None = None


def _num(metrics: Mapping[str, JSONValue], key: str) -> float | None:
    value = metrics.get(key)
    return float(value) if isinstance(value, int | float) else None


def mode_row(step: StepRecord) -> ModeRow:
    clients = step.all_params.get("clients")
    rep = step.all_params.get("repetition")
    steady = steady_state(step.series) if step.status == "completed" else None
    return ModeRow(
        clients=int(clients) if isinstance(clients, int) else None,
        repetition=int(rep) if isinstance(rep, int) else None,
        status=step.status,
        tps=_num(step.metrics, "tps"),
        latency_avg_ms=_num(step.metrics, "latency_avg_ms"),
        latency_p99_ms=_num(step.metrics, "latency_p99_ms"),
        conn_time_ms=_num(step.metrics, "conn_time_ms"),
        warnings=len(step.warnings),
        steady_tps=steady.tps if steady else None,
        steady_skipped_s=steady.skipped_s if steady else None,
    )


def _mode(params: Mapping[str, JSONValue]) -> str:
    return str(params.get("mode", "?"))


# -- the terminal ------------------------------------------------------------------------------


def mode_table(mode: str, rows: list[ModeRow]) -> RichTable:
    """One row per step, as pgbench printed it; steady TPS when the series were read."""
    show_rep = any(r.repetition for r in rows)
    show_steady = any(r.steady_tps is not None for r in rows)
    table = RichTable(title=f"pgbench {mode}", title_justify="left")
    table.add_column("clients", justify="right")
    if show_rep:
        table.add_column("rep", justify="right")
    for name in ("TPS", "avg latency ms", "p99 latency ms", "conn time ms"):
        # Headers stay on one line: they are what people copy into their notes.
        table.add_column(name, justify="right")
    if show_steady:
        table.add_column("steady TPS", justify="right")
        table.add_column("skipped", justify="right")
    table.add_column("status")
    for r in rows:
        cells = [str(r.clients) if r.clients is not None else "–"]
        if show_rep:
            cells.append(str(r.repetition or 1))
        status = r.status + (f" ({r.warnings} warnings)" if r.warnings else "")
        cells += [
            fmt(r.tps, 1, thousands=True),
            fmt(r.latency_avg_ms, 3),
            fmt(r.latency_p99_ms, 3),
            fmt(r.conn_time_ms, 2),
        ]
        if show_steady:
            skipped = f"{r.steady_skipped_s:g} s" if r.steady_skipped_s is not None else "–"
            cells += [fmt(r.steady_tps, 1, thousands=True), skipped]
        table.add_row(*cells, status)
    return table


# (metric, column header); the units are in the table's title. Connection time stays in
# the per-step tables and the reports: a terminal has no room for it here.
REPEATED_COLUMNS = (
    ("tps", "TPS"),
    ("latency_avg_ms", "avg latency"),
    ("latency_p99_ms", "p99 latency"),
)
# Stability warnings are shown for the figures people quote, not for connection time.
WARNED_METRICS = ("tps", "steady_tps", "latency_avg_ms", "latency_p99_ms")


def repeated_parts(mode: str, groups: list[StepGroup]) -> list[RenderableType]:
    """One row per client count: mean ± 95% CI over the repetitions, the CV of TPS, steady
    TPS with the seconds it leaves out, and the stability warnings as footnotes."""
    notes = Footnotes()
    show_steady = any(g.value("steady_tps") for g in groups)
    table = RichTable(
        title=f"pgbench {mode}: mean ± 95% CI over the repetitions; TPS in tx/s, times in ms",
        title_justify="left",
    )
    show_rate = any(rate_label(g.params) for g in groups)
    table.add_column("clients", justify="right", no_wrap=True)
    if show_rate:
        table.add_column("rate")
    table.add_column("n", justify="right", no_wrap=True)
    for _, header in REPEATED_COLUMNS:
        table.add_column(header, justify="right", no_wrap=True)
        if header == "TPS":
            table.add_column("CV", justify="right", no_wrap=True)
    if show_steady:
        table.add_column("steady TPS (skipped)", justify="right", no_wrap=True)
    table.add_column("notes")
    for g in groups:
        cells = [str(g.params.get("clients", "–"))]
        if show_rate:
            cells.append(rate_label(g.params) or "unlimited")
        cells.append(str(g.n))
        for name, header in REPEATED_COLUMNS:
            cells.append(figures.mean_ci(g.value(name), name))
            if header == "TPS":
                cells.append(figures.cv(g.value("tps")))
        if show_steady:
            skipped = figures.seconds_range([s.skipped_s for s in g.steady])
            cells.append(f"{figures.mean_ci(g.value('steady_tps'), 'steady_tps')} ({skipped})")
        cells.append(_group_notes(g, notes))
        table.add_row(*cells)
    return [table, *notes.lines()]


def _group_notes(group: StepGroup, notes: Footnotes) -> str:
    warnings = [
        f"{with_unit(name)}: {text}"
        for name, texts in group.warnings.items()
        if name in WARNED_METRICS
        for text in texts
    ]
    if any(not s.settled for s in group.steady):
        warnings.append("TPS did not settle within 10% in the first half of a repetition")
    warnings += group.step_warnings
    text = notes.ranged_refs(tuple(warnings))
    if group.failed:
        text = f"{group.failed} failed " + text
    return text.strip() or "ok"


# -- a report -------------------------------------------------------------------------------


PGBENCH_COLUMNS = (
    "tps",
    "steady_tps",
    "latency_avg_ms",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "conn_time_ms",
)


def pgbench_table(mode: str, placed: Sequence[Placed]) -> Table:
    """One row per target and client count: mean ± 95% CI of each figure over the
    repetitions (the value itself for one), the CV of TPS, and the seconds left out of the
    steady TPS."""
    show_rate = any(rate_label(p.group.params) for p in placed)
    columns = ["target", "clients"] + (["rate"] if show_rate else []) + ["n", with_unit("tps")]
    columns += ["TPS CV", with_unit("steady_tps"), "skipped at start"]
    columns += [with_unit(n) for n in PGBENCH_COLUMNS[2:]]
    table = Table(f"pgbench-{mode}", f"pgbench {mode}", columns)
    for p in placed:
        g = p.group
        not_settled = (
            ["TPS did not settle within 10% in the first half of a repetition"]
            if any(not s.settled for s in g.steady)
            else []
        )
        failed = [f"{g.failed} of {len(g.steps)} repetitions failed"] if g.failed else []
        row = [Cell(p.target.title), Cell(cell_text(g.params.get("clients")), numeric=True)]
        if show_rate:
            row.append(Cell(rate_label(g.params) or "unlimited"))
        row += [
            Cell(str(g.n), numeric=True),
            stat_cell(table, g, "tps", failed + g.step_warnings),
            Cell(figures.cv(g.value("tps")), numeric=True),
            stat_cell(table, g, "steady_tps", not_settled),
            Cell(figures.seconds_range([s.skipped_s for s in g.steady]), numeric=True),
        ]
        row += [stat_cell(table, g, name) for name in PGBENCH_COLUMNS[2:]]
        table.rows.append(row)
    return table


def tps_vs_clients(mode: str, placed: list[Placed], ids: ChartIds) -> Chart:
    chart = Chart(
        ids(),
        f"pgbench {mode}: TPS by clients (mean ± 95% CI)",
        "clients",
        "TPS (tx/s)",
        x_log=wide(placed),
    )
    for target, ps in by_target(placed):
        chart.traces.append(
            Trace(
                target.title,
                [clients_of(p) for p in ps],
                [mean_of(p.group, "tps") for p in ps],
                error=[error_of(p.group, "tps") for p in ps],
                group=target.key,
            )
        )
    return chart


def latency_vs_clients(mode: str, placed: list[Placed], ids: ChartIds) -> Chart:
    chart = Chart(
        ids(),
        f"pgbench {mode}: latency percentiles by clients",
        "clients",
        "latency (ms)",
        x_log=wide(placed),
    )
    dashes: tuple[Literal["solid", "dot", "dash"], ...] = ("dot", "dash", "solid")
    for target, ps in by_target(placed):
        for (name, short), dash in zip(PERCENTILES, dashes, strict=True):
            chart.traces.append(
                Trace(
                    f"{target.title} {short}",
                    [clients_of(p) for p in ps],
                    [mean_of(p.group, name) for p in ps],
                    error=[error_of(p.group, name) for p in ps],
                    group=target.key,
                    dash=dash,
                )
            )
    return chart


def modes_of(view: Overview) -> list[str]:
    """The modes of the report's pgbench tests, in the order they first ran."""
    return list(dict.fromkeys(str(p.group.params.get("mode")) for p in view.of(NAME)))


def mode_blocks(mode: str, placed: list[Placed], charts: ChartIds) -> list[Table | Chart]:
    """A mode's table, and its TPS and latency by clients. Fixed-rate steps have their own
    chart (latency vs offered load): against clients they would stack up on one client
    count."""
    full_speed = [p for p in placed if p.group.params.get("rate") is None]
    drawn = []
    if full_speed:
        drawn = [
            tps_vs_clients(mode, full_speed, charts),
            latency_vs_clients(mode, full_speed, charts),
        ]
    return [pgbench_table(mode, placed), *drawn]


class PgbenchReport(WorkloadReport):
    def terminal(self, slot: Slot, target: TargetSummary, notes: Footnotes) -> list[RenderableType]:
        if slot is not Slot.TESTS:
            return []
        modes: dict[str, list[ModeRow]] = {}
        for step in target.steps_of(NAME):
            modes.setdefault(_mode(step.all_params), []).append(mode_row(step))
        groups: dict[str, list[StepGroup]] = {}
        for group in target.groups_of(NAME):
            groups.setdefault(_mode(group.params), []).append(group)
        repeated = any(len(g.steps) > 1 for found in groups.values() for g in found)
        parts: list[RenderableType] = []
        for mode, rows in modes.items():
            if repeated:
                parts += repeated_parts(mode, groups.get(mode, []))
            else:
                parts.append(mode_table(mode, rows))
        return parts

    def run_terminal(self, run: RunRecord) -> list[RenderableType]:
        steps = [s for s in run.steps if s.workload == NAME]
        # then the events during steps (docs/events.md): a table and a verdict line each
        # then each test's trials (a repeated event step): their table and summary
        return [
            *rate_table.rate_parts(steps),
            *events_view.events_parts(run),
            *trials_view.trials_parts(run_trials(run)),
        ]

    def sections(self, slot: Slot, view: Overview, charts: ChartIds) -> list[Section]:
        if slot is not Slot.TESTS:
            return []
        placed = view.of(NAME)
        # Charts are numbered as they are made: every mode's first, then the rate curves'.
        sections = [
            Section(
                f"pgbench-{mode}",
                f"pgbench {mode}",
                [
                    *mode_blocks(
                        mode, [p for p in placed if p.group.params.get("mode") == mode], charts
                    )
                ],
            )
            for mode in modes_of(view)
        ]
        curves = rate_section.rate_blocks(view, NAME)
        if curves:
            sections.append(Section("latency-under-load", "Latency under load", curves))
        events = events_view.events_table(view.runs)
        if events.rows:  # issue 29: what each event cost, then its verdict line
            rows = [row for run in view.runs for row in events_view.event_rows(run)]
            blocks: list[Table | Chart | str] = [events, *events_view.verdict_lines(rows)]
            sections.append(Section("events", "Events during steps", blocks))
        trials = [t for run in view.runs for t in run_trials(run)]
        if trials:  # issue 38: each test's trials, their summary and charts
            sections.append(Section("trials", "Trials", trials_view.trials_blocks(trials, charts)))
        return sections

    def warmup_text(self, params: Mapping[str, JSONValue]) -> str:
        return (
            f"pgbench {params.get('mode')}, {params.get('clients')} clients, "
            f"{params.get('duration_s')} s"
        )


REPORT = PgbenchReport()
