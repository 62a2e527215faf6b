"""Charts of a report as plain data: titles with units, traces, shaded spans. The HTML report
draws them with plotly (charts_plotly.py), the Markdown report with matplotlib (charts_png.py);
both get the same charts from here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from howfast.analysis.groups import StepGroup
from howfast.analysis.overview import Overview, Placed, TargetView
from howfast.analysis.why import WhyLine
from howfast.model import Sample, StepRecord
from howfast.report import events_view

IO_FIELDS = ("read_iops", "write_iops", "read_mbps", "write_mbps")
SIGNIFICANT_DIGITS = 4  # per-second values: enough to read, and the page stays small
# Per-second charts of more tests than this would be hundreds of charts nobody scrolls
# through, and reading their samples would make a report of many runs slow.
MAX_PER_SECOND_TESTS = 60
DEFAULT_ROLES = ("data", "wal")


@dataclass
class Trace:
    name: str
    x: list[float | str]
    y: list[float | None]
    kind: Literal["line", "bar"] = "line"
    axis: Literal["y", "y2"] = "y"
    error: list[float | None] | None = None  # ± half the 95% confidence interval
    group: str | None = None  # traces of one group (a target) share a colour
    dash: Literal["solid", "dot", "dash"] = "solid"


@dataclass(frozen=True)
class Span:
    """A shaded stretch of the x axis: a checkpoint, seconds left out as warm-up, a stretch
    without commits after an event (downtime) or an event's for= window (during); or, with
    start == end, an event's moment (drawn as a line, labelled)."""

    start: float
    end: float
    label: str
    kind: Literal["checkpoint", "warmup", "event", "downtime", "during"]


@dataclass
class Chart:
    id: str
    title: str
    x_title: str
    y_title: str
    y2_title: str | None = None
    traces: list[Trace] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    bars: Literal["group", "stack"] = "group"
    horizontal: bool = False
    x_log: bool = False
    x_categories: bool = False


def _round(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    if value == 0:
        return 0.0
    return round(value, max(0, SIGNIFICANT_DIGITS - 1 - math.floor(math.log10(abs(value)))))


def _significant(values: Iterable[float]) -> list[float | None]:
    """Each value to SIGNIFICANT_DIGITS significant digits, NaN as None: vectorised, since a
    report has tens of thousands of per-second points."""
    import numpy as np  # loaded when a chart is drawn, not when a command starts

    v = np.fromiter(values, dtype=float)
    finite = np.isfinite(v) & (v != 0)
    magnitude = np.floor(np.log10(np.abs(v, where=finite, out=np.ones_like(v))))
    # Whole powers of ten from 10**0 up: the division is then exact to the nearest double.
    decimals = np.clip(SIGNIFICANT_DIGITS - 1 - magnitude, 0, 15)
    scale = np.power(10.0, decimals)
    rounded = np.where(np.isfinite(v), np.round(v * scale) / scale, np.nan)
    return [None if math.isnan(x) else x for x in rounded.tolist()]


def _xy(points: Sequence[Sample]) -> tuple[list[float | str], list[float | None]]:
    times: list[float | str] = [round(p.t, 2) for p in points]
    return times, _significant(p.value for p in points)


def io_series_names(roles: Iterable[str]) -> list[str]:
    return [f"io.{role}.{name}" for role in roles for name in IO_FIELDS]


class ChartIds:
    """Chart ids of one report, numbered in the order the charts are made."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> str:
        self.count += 1
        return f"chart-{self.count}"


def clients_of(p: Placed) -> int:
    value = p.group.params.get("clients")
    return value if isinstance(value, int) else 0


def by_target(placed: list[Placed]) -> list[tuple[TargetView, list[Placed]]]:
    """The tests of each target, by client count."""
    found: dict[str, list[Placed]] = {}
    for p in placed:
        found.setdefault(p.target.key, []).append(p)
    return [(ps[0].target, sorted(ps, key=clients_of)) for ps in found.values()]


def wide(placed: list[Placed]) -> bool:
    counts = [c for p in placed if (c := clients_of(p)) > 0]
    return bool(counts) and max(counts) / min(counts) >= 8


def error_of(g: StepGroup, name: str) -> float | None:
    s = g.value(name)
    return _round(s.ci_half) if s else None


def mean_of(g: StepGroup, name: str) -> float | None:
    s = g.value(name)
    return _round(s.mean) if s else None


def checkpoint_spans(step: StepRecord) -> list[Span]:
    """Checkpoints the samplers saw during the step, clipped to the step; none when the
    step was not sampled."""
    postgres = step.sections.get("postgres") or {}
    events = postgres.get("checkpoints") if isinstance(postgres, dict) else None
    if not isinstance(events, list):
        return []
    duration = step.all_params.get("duration_s")
    spans = []
    for event in events:
        if not isinstance(event, dict):
            continue
        start, end = event.get("start_t"), event.get("end_t")
        begin = max(0.0, float(start)) if isinstance(start, int | float) else 0.0
        if isinstance(end, int | float):
            finish = float(end)
        elif isinstance(duration, int | float):
            finish = float(duration)
        else:
            finish = begin
        reason = event.get("reason")
        label = f"checkpoint ({reason})" if reason else "checkpoint"
        spans.append(Span(round(begin, 3), round(max(begin, finish), 3), label, "checkpoint"))
    return spans


def event_spans(step: StepRecord) -> list[Span]:
    """Each event of the step as a line at its moment, its outage shaded, its for= window
    lightly (report/events_view.py)."""
    markers, stretches = events_view.chart_marks(step)
    spans = [Span(round(m.x, 3), round(m.x, 3), m.label, "event") for m in markers]
    for s in stretches:
        label = "no commits" if s.kind == "downtime" else "during"
        kind: Literal["downtime", "during"] = "downtime" if s.kind == "downtime" else "during"
        spans.append(Span(round(s.x0, 3), round(s.x1, 3), label, kind))
    return spans


def per_second(p: Placed, ids: ChartIds) -> Chart | None:
    """TPS and latency per second of every repetition, with checkpoints and the seconds the
    steady state leaves out (of the first repetition) shaded."""
    steps = [s for s in p.group.completed if s.series.get("tps")]
    if not steps:
        return None
    chart = Chart(
        ids(),
        f"{p.target.title}: {p.group.label}: TPS and latency per second",
        "time (s)",
        "TPS (tx/s)",
        "latency (ms)",
    )
    several = len(steps) > 1
    for number, step in enumerate(steps, start=1):
        suffix = f" #{number}" if several else ""
        x, y = _xy(step.series["tps"])
        chart.traces.append(Trace(f"TPS{suffix}", x, y, group=f"rep{number}"))
        if step.series.get("latency_ms"):
            x, y = _xy(step.series["latency_ms"])
            chart.traces.append(
                Trace(f"latency{suffix}", x, y, axis="y2", group=f"rep{number}", dash="dot")
            )
    chart.spans += checkpoint_spans(steps[0])
    chart.spans += event_spans(steps[0])
    if p.group.steady and p.group.steady[0].skipped_s > 0:
        skipped = p.group.steady[0].skipped_s
        chart.spans.append(Span(0.0, skipped, f"first {skipped:g} s left out", "warmup"))
    return chart


def io_per_second(p: Placed, ids: ChartIds) -> Chart | None:
    """Disk IOPS (left axis) and MB/s (right axis) per second and role, first repetition."""
    step = next((s for s in p.group.completed if _io_series(s)), None)
    if step is None:
        return None
    several = p.group.n > 1
    chart = Chart(
        ids(),
        f"{p.target.title}: {p.group.label}: disk I/O per second by role"
        + (" (repetition 1)" if several else ""),
        "time (s)",
        "IOPS",
        "MB/s",
    )
    for name, points in _io_series(step).items():
        _, role, what = name.split(".", 2)
        x, y = _xy(points)
        axis: Literal["y", "y2"] = "y" if what.endswith("iops") else "y2"
        label = f"{role} {what.replace('_iops', ' IOPS').replace('_mbps', ' MB/s')}"
        dash: Literal["solid", "dot", "dash"] = "solid" if axis == "y" else "dot"
        # A colour per role and direction; IOPS solid, MB/s dotted.
        group = f"{role} {what.split('_')[0]}"
        chart.traces.append(Trace(label, x, y, axis=axis, group=group, dash=dash))
    chart.spans += checkpoint_spans(step)
    return chart


def _io_series(step: StepRecord) -> dict[str, list[Sample]]:
    return {
        name: points
        for name, points in sorted(step.series.items())
        if name.startswith("io.") and name.count(".") == 2 and name.rsplit(".", 1)[1] in IO_FIELDS
    }


def wait_profiles(view: Overview, ids: ChartIds) -> list[Chart]:
    """Per target, a stacked bar per pgbench test: the share of active-session samples by wait
    event type (mean over the repetitions), to read beside the verdict."""
    charts = []
    targets: dict[str, list[WhyLine]] = {}
    for line in view.why:
        if line.wait_types:
            targets.setdefault(f"{line.run_id} {line.target}", []).append(line)
    titles = {f"{t.run_id} {t.name}": t.title for t in view.targets}
    for key, lines in targets.items():
        chart = Chart(
            ids(),
            f"{titles.get(key, key)}: wait profile (share of active-session samples)",
            "% of active time",
            "",
            bars="stack",
            horizontal=True,
            x_categories=True,
        )
        labels = [f"{line.label} — {line.verdict}" for line in lines]
        types = sorted(
            {t for line in lines for t in line.wait_types},
            key=lambda t: -sum(line.wait_types.get(t, 0.0) for line in lines),
        )
        for wait_type in types:
            chart.traces.append(
                Trace(
                    wait_type,
                    list(labels),
                    [_round(100 * line.wait_types.get(wait_type, 0.0)) for line in lines],
                    kind="bar",
                )
            )
        charts.append(chart)
    return charts
