"""Steady state of a pgbench step: the per-second TPS once it has settled.

The first seconds of a run are often not like the rest: caches fill, connections start, the
first checkpoint has not come. The rule (docs/statistics.md), on the per-second `tps` series:

  reference = the median TPS of the second half of the step;
  the steady state starts at the first second within 10% of the reference;
  the seconds before it are left out of the steady-state figures, never more than half.

When no second of the first half comes within 10%, the first half is left out and the step is
marked as not having settled. Steps with fewer than MIN_POINTS seconds are not judged.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from howfast.model import Sample

STEADY_BAND = 0.10
SERIES = ("tps", "latency_ms")  # the per-second series the rule reads
MIN_POINTS = 10  # a shorter step has no steady state worth the name


@dataclass(frozen=True)
class SteadyState:
    skipped_points: int
    skipped_s: float  # how many seconds at the start were left out
    settled: bool  # False: no second of the first half came within the band
    tps: float
    latency_avg_ms: float | None


def _finite(points: Sequence[Sample]) -> list[Sample]:
    return [p for p in points if math.isfinite(p.value)]


def _interval(points: Sequence[Sample]) -> float:
    gaps = [b.t - a.t for a, b in itertools.pairwise(points) if b.t > a.t]
    return statistics.median(gaps) if gaps else 1.0


def steady_start(values: Sequence[float]) -> tuple[int, bool]:
    """(index of the first steady value, whether one came within the band in the first
    half). The rule of the module docstring."""
    half = len(values) // 2
    reference = statistics.median(values[half:])
    for index, value in enumerate(values[: half + 1]):
        if abs(value - reference) <= STEADY_BAND * abs(reference):
            return index, True
    return half, False


def steady_state(series: Mapping[str, Sequence[Sample]]) -> SteadyState | None:
    """Steady TPS and latency of a step from its `tps` (and `latency_ms`) series; None
    without a series of at least MIN_POINTS seconds."""
    tps = _finite(series.get("tps") or ())
    if len(tps) < MIN_POINTS:
        return None
    start, settled = steady_start([p.value for p in tps])
    kept = tps[start:]
    return SteadyState(
        skipped_points=start,
        skipped_s=round(start * _interval(tps), 3),
        settled=settled,
        tps=statistics.fmean(p.value for p in kept),
        latency_avg_ms=_latency(series.get("latency_ms") or (), kept),
    )


def _latency(latency: Sequence[Sample], kept_tps: list[Sample]) -> float | None:
    """Average latency over the steady seconds. Each second's average weighs by the
    transactions of that second, when the two series share their times; a plain mean of
    the seconds from the steady start otherwise."""
    latency = _finite(latency)
    if not latency or not kept_tps:
        return None
    weights = {round(p.t, 3): p.value for p in kept_tps}
    paired = [(p.value, weights[round(p.t, 3)]) for p in latency if round(p.t, 3) in weights]
    total = sum(w for _, w in paired)
    if paired and total > 0:
        return sum(v * w for v, w in paired) / total
    after = [p.value for p in latency if p.t >= kept_tps[0].t]
    return statistics.fmean(after) if after else None
