"""Charts as plotly figures (plain JSON: data and layout) for the HTML report."""

from __future__ import annotations

from typing import Any

from howfast.report.charts import Chart, Trace

# Okabe–Ito: told apart by people with colour-blindness too.
PALETTE = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#F0E442",
    "#000000",
)
SPAN_COLOURS = {
    "checkpoint": "rgba(213, 94, 0, 0.15)",
    "warmup": "rgba(120, 120, 120, 0.15)",
    "event": "rgba(0, 0, 0, 0.8)",  # an event's moment: a line
    "downtime": "rgba(204, 0, 0, 0.25)",  # no commit: shaded red
    "during": "rgba(0, 114, 178, 0.10)",  # a for= window: lighter
}
LABELLED_AT_TOP = ("checkpoint", "event")


def colours(chart: Chart) -> dict[str, str]:
    """A colour per trace group (a target, a repetition, a role), in order of appearance."""
    keys = dict.fromkeys(t.group or t.name for t in chart.traces)
    return {key: PALETTE[i % len(PALETTE)] for i, key in enumerate(keys)}


def _trace(t: Trace, chart: Chart, colour: str) -> dict[str, Any]:
    x, y = (t.y, t.x) if chart.horizontal else (t.x, t.y)
    trace: dict[str, Any] = {"name": t.name, "x": x, "y": y}
    if t.kind == "bar":
        trace.update(type="bar", marker={"color": colour})
        if chart.horizontal:
            trace["orientation"] = "h"
    else:
        mode = "lines+markers" if len(t.x) <= 20 else "lines"
        trace.update(type="scatter", mode=mode, line={"color": colour, "dash": t.dash})
    if t.axis == "y2":
        trace["yaxis"] = "y2"
    if t.error and any(e is not None for e in t.error):
        key = "error_x" if chart.horizontal else "error_y"
        trace[key] = {"type": "data", "array": t.error, "visible": True}
    return trace


def _axis(title: str, **extra: Any) -> dict[str, Any]:
    return {"title": {"text": title}, "automargin": True, **extra}


def figure(chart: Chart) -> dict[str, Any]:
    palette = colours(chart)
    data = [_trace(t, chart, palette[t.group or t.name]) for t in chart.traces]
    x_axis = _axis(chart.x_title)
    if chart.x_title == "clients":  # ticks at the client counts that ran, not 1.5 clients
        ticks = sorted({x for t in chart.traces for x in t.x if isinstance(x, int | float)})
        x_axis.update(tickmode="array", tickvals=ticks)
    if chart.x_log:
        x_axis["type"] = "log"
    elif chart.x_categories and not chart.horizontal:
        x_axis["type"] = "category"
    # Every figure drawn is positive: an error bar must not stretch the axis below zero.
    y_axis = _axis(chart.y_title, rangemode="tozero", autorangeoptions={"minallowed": 0})
    if chart.horizontal:
        x_axis, y_axis = _axis(chart.x_title, rangemode="tozero"), _axis(chart.y_title)
        y_axis["type"] = "category"
    layout: dict[str, Any] = {
        "title": {"text": chart.title, "font": {"size": 14}},
        "xaxis": x_axis,
        "yaxis": y_axis,
        "barmode": chart.bars,
        "height": 380,
        "margin": {"t": 48, "r": 24, "b": 48, "l": 64},
        "legend": {"orientation": "h", "y": -0.2},
        "hovermode": "x unified" if not chart.x_categories else "closest",
    }
    if chart.y2_title:
        layout["yaxis2"] = _axis(
            chart.y2_title,
            overlaying="y",
            side="right",
            rangemode="tozero",
            autorangeoptions={"minallowed": 0},
            showgrid=False,
            tickmode="auto",
        )
    layout["shapes"] = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": s.start,
            "x1": s.end if s.end > s.start or s.kind in ("event", "downtime") else s.start + 0.5,
            "y0": 0,
            "y1": 1,
            "fillcolor": SPAN_COLOURS[s.kind],
            "line": (
                {"width": 1.5, "color": SPAN_COLOURS[s.kind], "dash": "dash"}
                if s.kind == "event"
                else {"width": 0}
            ),
            "layer": "below",
        }
        for s in chart.spans
    ]
    # Checkpoints are labelled at the top, the seconds left out at the bottom: they overlap.
    layout["annotations"] = [
        {
            "x": s.start,
            "xref": "x",
            "y": 1 if s.kind in LABELLED_AT_TOP else 0,
            "yref": "paper",
            "text": s.label,
            "showarrow": False,
            "xanchor": "left",
            "yanchor": "top" if s.kind in LABELLED_AT_TOP else "bottom",
            "font": {"size": 10},
        }
        for s in chart.spans
        if s.kind != "downtime"  # the event's line says what it is
    ]
    return {"data": data, "layout": layout}
