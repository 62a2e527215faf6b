"""Charts as PNG images with matplotlib, for the Markdown report (a wiki or a pull request
shows images, not scripts)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from howfast.report.charts import Chart, Trace
from howfast.report.charts_plotly import colours

DASHES = {"solid": "-", "dot": ":", "dash": "--"}
SPAN_FACE = {
    "checkpoint": "#D55E00",
    "warmup": "#787878",
    "event": "#000000",
    "downtime": "#CC0000",
    "during": "#0072B2",
}


def _numbers(values: list[float | str]) -> list[float]:
    return [float(v) for v in values]


def _values(values: list[float | None]) -> list[float]:
    return [float("nan") if v is None else v for v in values]


def _errors(values: list[float | None] | None) -> list[float] | None:
    if not values or all(v is None for v in values):
        return None
    return [0.0 if v is None else v for v in values]


def _line(ax: Axes, t: Trace, colour: str) -> None:
    style = DASHES[t.dash]
    marker = "o" if len(t.x) <= 20 else None
    errors = _errors(t.error)
    if errors:
        ax.errorbar(
            _numbers(t.x), _values(t.y), yerr=errors, label=t.name, color=colour,
            linestyle=style, marker=marker, capsize=3, linewidth=1.4,
        )  # fmt: skip
    else:
        ax.plot(
            _numbers(t.x), _values(t.y), label=t.name, color=colour, linestyle=style,
            marker=marker, linewidth=1.2,
        )  # fmt: skip


def _bars(ax: Axes, chart: Chart, palette: dict[str, str]) -> None:
    """Grouped or stacked bars over the categories of all traces."""
    categories = list(dict.fromkeys(str(x) for t in chart.traces for x in t.x))
    positions = {c: i for i, c in enumerate(categories)}
    count = len(chart.traces)
    width = 0.8 if chart.bars == "stack" else 0.8 / max(count, 1)
    base = [0.0] * len(categories)
    for index, t in enumerate(chart.traces):
        slots = [positions[str(x)] for x in t.x]
        heights = [0.0 if v is None else v for v in t.y]
        offset = 0.0 if chart.bars == "stack" else (index - (count - 1) / 2) * width
        where = [s + offset for s in slots]
        bottoms = [base[s] for s in slots] if chart.bars == "stack" else None
        colour = palette[t.group or t.name]
        errors = _errors(t.error)
        if chart.horizontal:
            ax.barh(where, heights, height=width, left=bottoms, label=t.name, color=colour,
                    xerr=errors)  # fmt: skip
        else:
            ax.bar(where, heights, width=width, bottom=bottoms, label=t.name, color=colour,
                   yerr=errors, capsize=2)  # fmt: skip
        if chart.bars == "stack":
            for s, h in zip(slots, heights, strict=True):
                base[s] += h
    ticks = list(range(len(categories)))
    if chart.horizontal:
        ax.set_yticks(ticks, categories, fontsize=8)
    else:
        ax.set_xticks(ticks, categories, rotation=20, ha="right", fontsize=8)


def render_png(chart: Chart, path: Path) -> None:
    bars = any(t.kind == "bar" for t in chart.traces)
    # Bar charts have category labels of any length: let matplotlib fit them (it is slower).
    # Line charts have numbers on their axes, and fixed margins render twice as fast.
    figure = Figure(figsize=(9, 4.2), dpi=100, layout="constrained" if bars else None)
    FigureCanvasAgg(figure)
    if not bars:
        figure.subplots_adjust(left=0.08, right=0.92, top=0.92, bottom=0.12)
    ax = figure.add_subplot()
    palette = colours(chart)
    ax.set_title(chart.title, fontsize=10)
    if bars:
        _bars(ax, chart, palette)
    else:
        right = ax.twinx() if chart.y2_title else None
        for t in chart.traces:
            axis = right if (t.axis == "y2" and right is not None) else ax
            _line(axis, t, palette[t.group or t.name])
        if right is not None:
            right.set_ylabel(chart.y2_title or "")
            right.set_ylim(bottom=0)
        if chart.x_log:
            ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        for span in chart.spans:
            if span.kind == "event":  # a moment: a dashed line
                ax.axvline(span.start, color=SPAN_FACE["event"], linestyle="--", linewidth=1)
                continue
            exact = span.kind == "downtime"  # an outage is drawn as long as it was
            end = span.end if exact else max(span.end, span.start + 0.5)
            ax.axvspan(span.start, end, color=SPAN_FACE[span.kind],
                       alpha=0.3 if exact else 0.15, linewidth=0)  # fmt: skip
    ax.set_xlabel(chart.x_title)
    ax.set_ylabel(chart.y_title)
    ax.grid(alpha=0.3)
    handles, labels = [], []
    for axis in figure.axes:
        h, lab = axis.get_legend_handles_labels()
        handles += h
        labels += lab
    if handles:
        ax.legend(handles, labels, fontsize=7, loc="best", ncols=2)
    figure.savefig(path, format="png")
