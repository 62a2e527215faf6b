"""Trials as `results show` and the reports show them (docs/events.md#trials-the-statistics):
per test with trials, a table with one row per trial, then the summary a decision needs
(loss k of N with its interval, lost per trial, downtime and recovery p50/p95/max, the SLO
verdict), and in the reports two charts per test: downtime and recovery per trial, lost
commits per trial. Formatting only: the figures are analysis/trials.py's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import RenderableType
from rich.table import Table as RichTable
from rich.text import Text

from howfast.analysis.trials import Trial, TrialsSummary
from howfast.model import JSONValue
from howfast.report.charts import Chart, ChartIds, Trace
from howfast.report.figures import DASH
from howfast.report.tables import Cell, Table
from howfast.units import format_bytes

COLUMNS = ["trial", "downtime", "back to 90%", "lost", "lost (max)", "in doubt", "standby lag"]


def _seconds(value: float | None, to_end: bool = False) -> str:
    if value is None:
        return DASH
    text = f"{value:.2f} s" if value < 10 else f"{value:.1f} s"
    return text + (" (to the end)" if to_end else "")


def _int(value: int | None) -> str:
    return DASH if value is None else f"{value:,}"


def _lag(value: int | None) -> str:
    if value is None:
        return DASH
    return "0" if value == 0 else format_bytes(value)


def trial_cells(trial: Trial, outcome: str | None = None) -> list[str]:
    cells = [
        str(trial.number),
        _seconds(trial.downtime_s, trial.down_to_end),
        _seconds(trial.recovery_s),
        _int(trial.lost),
        _int(trial.lost_max),
        _int(trial.in_doubt),
        _lag(trial.standby_lag_bytes),
    ]
    if outcome is not None:
        cells.append(outcome)
    return cells


def title(summary: TrialsSummary) -> str:
    asked = f", {summary.asked} asked" if summary.asked is not None else ""
    return (
        f"Trials: {summary.target}, {summary.label} ({len(summary.trials)} trials{asked}; "
        f"{', '.join(dict.fromkeys(e for t in summary.trials for e in t.events))})"
    )


def _outcomes(summary: TrialsSummary) -> dict[int, str]:
    if summary.slo is None:
        return {}
    return {c.trial: c.outcome for c in summary.slo.checks}


def trials_parts(summaries: Sequence[TrialsSummary]) -> list[RenderableType]:
    """`results show`: per test, the table then the summary lines."""
    parts: list[RenderableType] = []
    for summary in summaries:
        outcomes = _outcomes(summary)
        table = RichTable(title=title(summary), title_justify="left")
        columns = [*COLUMNS, *(["SLO"] if summary.slo else [])]
        for i, name in enumerate(columns):
            table.add_column(name, justify="right" if 0 < i < len(COLUMNS) else "left")
        for trial in summary.trials:
            table.add_row(*trial_cells(trial, outcomes.get(trial.number) if outcomes else None))
        parts.append(table)
        parts += [Text(f"  {line}") for line in summary.lines()]
    return parts


def trials_table(summary: TrialsSummary, index: int) -> Table:
    outcomes = _outcomes(summary)
    columns = [*COLUMNS, *(["SLO"] if summary.slo else [])]
    table = Table(f"trials-{index}", title(summary), columns)
    for trial in summary.trials:
        texts = trial_cells(trial, outcomes.get(trial.number) if outcomes else None)
        table.rows.append([Cell(t, numeric=0 < i < len(COLUMNS)) for i, t in enumerate(texts)])
    return table


def trials_charts(summary: TrialsSummary, charts: ChartIds) -> list[Chart]:
    """Downtime and recovery per trial; lost commits per trial (proven, and the in-doubt
    ones that may be lost too, stacked)."""
    x: list[float | str] = [f"trial {t.number}" for t in summary.trials]
    times = Chart(
        charts(),
        f"{summary.target}: {summary.label}: downtime and recovery per trial",
        "trial",
        "seconds",
        x_categories=True,
    )
    times.traces = [
        Trace("downtime", x, [t.downtime_s for t in summary.trials], kind="bar"),
        Trace("back to 90%", x, [t.recovery_s for t in summary.trials], kind="bar"),
    ]
    lost = Chart(
        charts(),
        f"{summary.target}: {summary.label}: lost commits per trial",
        "trial",
        "commits",
        bars="stack",
        x_categories=True,
    )

    def possible(t: Trial) -> float | None:
        if t.lost is None or t.lost_max is None:
            return None
        return float(t.lost_max - t.lost)

    lost.traces = [
        Trace(
            "lost (proven)",
            x,
            [None if t.lost is None else float(t.lost) for t in summary.trials],
            kind="bar",
        ),
        Trace("in doubt (may be lost)", x, [possible(t) for t in summary.trials], kind="bar"),
    ]
    return [times, lost]


def trials_blocks(
    summaries: Sequence[TrialsSummary], charts: ChartIds
) -> list[Table | Chart | str]:
    """The reports' trials section: per test, the table, the summary lines, the charts."""
    blocks: list[Table | Chart | str] = []
    for index, summary in enumerate(summaries, start=1):
        blocks.append(trials_table(summary, index))
        blocks += summary.lines()
        blocks += trials_charts(summary, charts)
    return blocks


def compare_lines(found: Sequence[Mapping[str, JSONValue]]) -> list[str]:
    """`compare` and the report's comparison: per test with trials on both sides, each side's
    loss line, then whether the probabilities of loss differ."""
    lines: list[str] = []
    for test in found:
        lines.append(f"Trials of {test.get('label')}:")
        sides, differences = test.get("sides"), test.get("differences")
        for side in sides if isinstance(sides, list) else []:
            if isinstance(side, dict):
                lines.append(f"  {side.get('line')}")
        for difference in differences if isinstance(differences, list) else []:
            if isinstance(difference, dict):
                lines.append(f"  {difference.get('statement')}")
    return lines
