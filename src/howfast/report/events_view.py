"""Events during steps as `results show` and the reports show them (docs/events.md): one
table of every event of a run (step, event, when, downtime, recovery, TPS and p99 before and
after, failed transactions, lost commits), then a verdict line per event; and the marks and
shaded spans of an event step's per-second charts. Formatting only: the figures are
analysis/events.py's, derived when the run is read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import RenderableType
from rich.table import Table as RichTable
from rich.text import Text

from howfast.analysis.events import EventFigures, event_line, step_figures
from howfast.model import RunRecord, StepRecord
from howfast.report.figures import DASH
from howfast.report.tables import Cell, Table

COLUMNS = [
    "target",
    "step",
    "event",
    "at",
    "downtime",
    "back to 90%",
    "TPS before → after",
    "p99 ms before → after",
    "failed",
    "lost commits",
]
NOT_VERIFIED = "✗"


@dataclass(frozen=True)
class EventRow:
    step: StepRecord
    figures: EventFigures


def event_rows(run: RunRecord) -> list[EventRow]:
    return [
        EventRow(step, fig)
        for step in run.steps
        for fig in step_figures(step.sections, step.histograms)
    ]


def step_label(step: StepRecord) -> str:
    params = step.params
    clients = params.get("clients")
    return f"{params.get('mode', 'pgbench')}, {clients} clients" if clients else str(step.workload)


def _seconds(value: float | None) -> str:
    if value is None:
        return DASH
    return f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


def _pair(before: float | None, after: float | None, digits: int) -> str:
    def one(v: float | None) -> str:
        return DASH if v is None else f"{v:,.{digits}f}"

    return f"{one(before)} → {one(after)}"


def _lost(fig: EventFigures) -> str:
    lost = fig.lost
    if lost is None:
        return DASH
    if lost.lost == lost.lost_max:
        return str(lost.lost)
    return f"{lost.lost}–{lost.lost_max} ({lost.in_doubt} in doubt)"


def cells(row: EventRow) -> list[str]:
    fig, mark = row.figures, row.figures.mark
    event = mark.text + (f" {NOT_VERIFIED}" if mark.verified is False else "")
    if mark.skipped or mark.error:
        event += " (not applied)" if mark.skipped else " (failed)"
    downtime = _seconds(fig.downtime_s)
    if fig.gap is not None and not fig.gap.closed:
        downtime += " (to the end)"
    return [
        row.step.target,
        step_label(row.step),
        event,
        DASH if mark.applied_s is None else f"{mark.applied_s:.1f} s",
        downtime,
        _seconds(fig.recovery_s),
        _pair(fig.tps_before, fig.tps_after, 0),
        _pair(fig.p99_before_ms, fig.p99_after_ms, 2),
        str(fig.failed_transactions),
        _lost(fig),
    ]


def verdict_lines(rows: Sequence[EventRow]) -> list[str]:
    """'/mnt/a, tpcb-like, 2 clients: restart at 3 s: ...': a run's steps may share events."""
    return [f"{row.step.target}, {step_label(row.step)}: {event_line(row.figures)}" for row in rows]


def events_table(runs: Sequence[RunRecord]) -> Table:
    """The reports' events table (HTML, Markdown); no rows when no step had events."""
    table = Table("events", "Events during steps", list(COLUMNS))
    for run in runs:
        for row in event_rows(run):
            notes = table.note([row.figures.mark.problem] if row.figures.mark.problem else [])
            texts = cells(row)
            table.rows.append(
                [Cell(t, notes if i == 2 else (), numeric=i >= 3) for i, t in enumerate(texts)]
            )
    return table


def rebuilt_line(step: StepRecord) -> str | None:
    """'/mnt/a, tpcb-like, 1 clients: ran on standby_1, promoted by a failover; the design
    rebuilt before it in 2.31 s (standby_1 made again by base backup, sync)', for a step
    after a failover whose design was rebuilt (`resolved.design_restored`)."""
    done = step.resolved.get("design_restored")
    if not isinstance(done, dict):
        return None
    seconds = done.get("seconds")
    took = f" in {_seconds(float(seconds))}" if isinstance(seconds, int | float) else ""
    state = done.get("standby_sync_state") or "not streaming"
    return (
        f"{step.target}, {step_label(step)}: ran on {done.get('primary')}, promoted by a "
        f"failover; the design rebuilt before it{took} ({done.get('standby')} made again by "
        f"base backup, {state})"
    )


def events_parts(run: RunRecord) -> list[RenderableType]:
    """`results show`: the table, then a verdict line per event, then a line per step run
    on a design rebuilt after a failover; [] without events."""
    rows = event_rows(run)
    if not rows:
        return []
    table = RichTable(title="Events", title_justify="left")
    for i, name in enumerate(COLUMNS):
        table.add_column(name, justify="right" if i >= 3 else "left")
    for row in rows:
        table.add_row(*cells(row))
    rebuilt = [line for line in map(rebuilt_line, run.steps) if line]
    return [table, *(Text(f"  {line}") for line in [*verdict_lines(rows), *rebuilt])]


# --- charts ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Marker:
    x: float  # seconds into the step's load: when the action was applied
    label: str


@dataclass(frozen=True)
class Span:
    x0: float
    x1: float
    kind: str  # "downtime": no commit; "during": a for= window


def chart_marks(step: StepRecord) -> tuple[list[Marker], list[Span]]:
    """The vertical lines (each applied event) and the shaded spans (each outage, each for=
    window) of an event step's per-second charts."""
    markers: list[Marker] = []
    spans: list[Span] = []
    for fig in step_figures(step.sections, step.histograms):
        mark = fig.mark
        if mark.applied_s is None:
            continue
        markers.append(Marker(mark.applied_s, mark.text))
        if fig.gap is not None and fig.gap.length > 0:
            spans.append(Span(fig.gap.t0, fig.gap.t1, "downtime"))
        if mark.undone_s is not None:
            spans.append(Span(mark.applied_s, mark.undone_s, "during"))
    return markers, spans
