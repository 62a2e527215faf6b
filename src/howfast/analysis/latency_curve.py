"""Latency under load: was an offered rate met, where does latency turn up (the knee), and
which rates meet a latency objective. Pure functions over per-rate step results.

Rules, kept simple enough to explain in one sentence each (docs/latency-under-load.md):
- a rate is *met* when pgbench achieved at least 95% of it (less in short or slow steps,
  where pgbench's random, Poisson-distributed schedule alone scatters the count by
  3/sqrt(expected transactions)), skipped nothing, and the schedule lag did not pile up
  (average lag under the larger of 10 ms and twice the average latency, not growing past it);
- the *knee* is the highest offered rate before latency rises for good above 1.5x its
  baseline (the median latency of the lowest third of the rates), so one noisy point in the
  flat part does not count as the turn;
- an objective is met only at a rate that was met: transactions that did run fast say nothing
  when the others were queued or skipped.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from howfast.model import JSONValue
from howfast.rates import Slo

ACHIEVED_FRACTION = 0.95
LAG_FLOOR_MS = 10.0
LAG_LATENCY_FACTOR = 2.0
KNEE_RISE_FACTOR = 1.5


@dataclass(frozen=True)
class RatePoint:
    offered: float  # transactions per second asked of pgbench (--rate)
    achieved: float  # transactions per second it made
    latency_avg_ms: float
    lag_avg_ms: float | None = None
    skipped: int = 0
    lag_series_ms: tuple[float, ...] = ()  # per-second schedule lag, to see it grow
    duration_s: float | None = None  # to tell a short step's chance scatter from a miss

    def achieved_floor(self) -> float:
        """The least share of the offered rate that still counts as met."""
        tolerance = 1 - ACHIEVED_FRACTION
        if self.duration_s:
            expected = self.offered * self.duration_s
            tolerance = max(tolerance, 3 / math.sqrt(max(expected, 1.0)))
        return 1 - tolerance


@dataclass(frozen=True)
class RateVerdict:
    met: bool
    reason: str


@dataclass(frozen=True)
class Knee:
    rate: float | None  # None: latency never turned up in the tested range
    first_rising_rate: float | None
    baseline_ms: float
    how: str


def lag_growing(lag_ms: Sequence[float], floor_ms: float = 1.0) -> bool:
    """Lag that piles up: the last third of the step's seconds averages more than twice the
    first third, and more than `floor_ms` (lags under it wobble without meaning), and the
    middle third has already climbed part of the way (at least 15% of the rise). A backlog
    grows through the step; one stall in its last seconds (a shared machine's hiccup, seen
    failing a 3 s step at a tenth of capacity) raises the last third alone and is not growth."""
    if len(lag_ms) < 3:
        return False
    third = max(1, len(lag_ms) // 3)
    first, last = statistics.fmean(lag_ms[:third]), statistics.fmean(lag_ms[-third:])
    middle = statistics.fmean(lag_ms[third:-third])
    rise = last - first
    return last > floor_ms and last > 2.0 * first and middle - first >= 0.15 * rise


def rate_verdict(point: RatePoint) -> RateVerdict:
    if point.offered <= 0:
        return RateVerdict(False, "no rate was offered")
    ratio = point.achieved / point.offered
    floor = point.achieved_floor()
    if ratio < floor:
        return RateVerdict(False, f"achieved {ratio:.0%} of the offered rate (< {floor:.0%})")
    if point.skipped:
        return RateVerdict(False, f"{point.skipped} transactions skipped (latency limit)")
    lag_limit = max(LAG_FLOOR_MS, LAG_LATENCY_FACTOR * point.latency_avg_ms)
    if point.lag_avg_ms is not None and point.lag_avg_ms > lag_limit:
        return RateVerdict(
            False, f"schedule lag {point.lag_avg_ms:.2f} ms above {lag_limit:.2f} ms"
        )
    # Growth counts once the lag has reached, by the step's end, what the average is allowed:
    # lag also rises when each transaction takes longer (a shared machine slowing down: at a
    # tenth of capacity, 0.4, 2.7 then 9.8 ms with transactions of 12 ms), with no backlog.
    if lag_growing(point.lag_series_ms, floor_ms=lag_limit):
        return RateVerdict(False, "schedule lag kept growing during the step")
    return RateVerdict(True, f"achieved {ratio:.0%} of the offered rate, lag small")


def saturation_rate(points: Sequence[RatePoint]) -> float | None:
    """The highest offered rate that was still met."""
    met = [p.offered for p in points if rate_verdict(p).met]
    return max(met) if met else None


def find_knee(curve: Sequence[tuple[float, float]]) -> Knee:
    """`curve`: (offered rate, latency ms) pairs. See the module docstring for the rule."""
    points = sorted(curve)
    if len(points) < 3:
        return Knee(None, None, points[0][1] if points else 0.0, "fewer than 3 rates: no knee")
    low = points[: max(1, len(points) // 3)]
    baseline = statistics.median(lat for _, lat in low)
    threshold = KNEE_RISE_FACTOR * baseline
    rising_from = None
    for i in range(len(points)):
        if all(lat > threshold for _, lat in points[i:]):
            rising_from = i
            break
    if rising_from is None:
        return Knee(None, None, baseline,
                    f"latency stayed within {KNEE_RISE_FACTOR}x its baseline "
                    f"{baseline:.3f} ms at every rate")  # fmt: skip
    # rising_from > 0: the baseline includes the lowest rate, which is never above it.
    knee_rate = points[rising_from - 1][0]
    return Knee(
        knee_rate,
        points[rising_from][0],
        baseline,
        f"latency rises above {KNEE_RISE_FACTOR}x its baseline {baseline:.3f} ms from "
        f"{points[rising_from][0]:g}/s on and stays there; the last rate before is the knee",
    )


def slo_verdict(slo: Slo, metrics: dict[str, JSONValue], rate_met: bool) -> dict[str, JSONValue]:
    """Metrics to store next to the step's own: the objective, the measured value, and
    `slo_met`. A rate that was not met meets no objective."""
    value = metrics.get(slo.metric)
    measured = float(value) if isinstance(value, int | float) else None
    met = rate_met and measured is not None and measured <= slo.limit_ms
    return {
        "slo": slo.text,
        "slo_metric": slo.metric,
        "slo_limit_ms": slo.limit_ms,
        "slo_value_ms": measured,
        "slo_met": met,
    }


def highest_rate_meeting(verdicts: Sequence[tuple[float, bool]]) -> float | None:
    """The highest tested rate whose step met the objective."""
    met = [rate for rate, ok in verdicts if ok]
    return max(met) if met else None
