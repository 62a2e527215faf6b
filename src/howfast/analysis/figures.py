"""Stored figures no analysis can use, set aside before a run is derived.

Runs stored before howfast checked what a run file or a tool's output holds (issue 35) may
hold a TPS of -500, 1e308, NaN or the text "fast": statistics over them overflow or make no
sense (a ratio of -1.57x, a gate failing a run that got faster). Such a figure is read as
not measured (null, shown as "—"), and the step says which figure and why, with the rule of
metric.py that `import run` applies. Pure; the stored run is not changed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from howfast.metric import ANY, Bounds, bounds_for, series_bounds
from howfast.model import JSONValue, Sample, StepRecord

SET_ASIDE = "not used (shown as —)"


def usable_step(step: StepRecord) -> StepRecord:
    """The step with each metric, param and series value its rule refuses set aside, and a
    warning for each metric or param and each series set aside."""
    warnings: list[str] = []
    metrics = _usable(step.metrics, "stored figure", warnings)
    params = _usable(step.params, "stored param", warnings)
    resolved = _usable(step.resolved, "stored param", warnings)
    series = dict(step.series)
    for name, points in step.series.items():
        bounds = series_bounds(name)
        if any(_refused(bounds, p.value) for p in points if not math.isnan(p.value)):
            series[name] = [
                p if math.isnan(p.value) or not _refused(bounds, p.value) else Sample(p.t, math.nan)
                for p in points
            ]
            warnings.append(f"series {name}: values that are not {bounds.kind} {SET_ASIDE}")
    if not warnings:
        return step
    return replace(
        step,
        metrics=metrics,
        params=params,
        resolved=resolved,
        series=series,
        warnings=[*step.warnings, *(w for w in warnings if w not in step.warnings)],
    )


def _usable(
    figures: Mapping[str, JSONValue], what: str, warnings: list[str]
) -> dict[str, JSONValue]:
    out = dict(figures)
    for name, value in figures.items():
        bounds = bounds_for(name)
        if value is None or (isinstance(value, str | dict | list | bool) and bounds is None):
            continue  # what no rule names: a verdict's text, a statement table, a flag
        fault = (bounds or ANY).fault(value)
        if fault is not None:
            out[name] = None
            warnings.append(f"{what} {name}: {fault}: {SET_ASIDE}")
    return out


def _within(bounds: Bounds, value: float) -> bool:
    return bounds.low <= value <= bounds.high


def _refused(bounds: Bounds, value: float) -> bool:
    # Series hold averages over a second: a count's need not be whole.
    return not math.isfinite(value) or not bounds.low <= value <= bounds.high


def usable_facts(facts: JSONValue) -> JSONValue:
    """An environment, a device, a client: its numbers its rules refuse (by name, else any
    finite figure within ±2^63), in nested objects and lists too, read as null: a memory of
    1e308 bytes is not printed with its 309 digits."""
    if isinstance(facts, dict):
        out: dict[str, JSONValue] = {}
        for key, value in facts.items():
            bounds = bounds_for(str(key)) or ANY
            if isinstance(value, int | float) and not isinstance(value, bool):
                # the range only: a fact may be a whole number written as a float
                out[key] = value if math.isfinite(value) and _within(bounds, value) else None
            else:
                out[key] = usable_facts(value)
        return out
    if isinstance(facts, list):
        return [usable_facts(v) for v in facts]
    if isinstance(facts, float) and ANY.fault(facts) is not None:
        return None
    return facts
