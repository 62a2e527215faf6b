"""The knee finder, rate verdicts and latency objectives on synthetic curves."""

from __future__ import annotations

import random

import pytest

from howfast.analysis.latency_curve import (
    RatePoint,
    find_knee,
    highest_rate_meeting,
    lag_growing,
    rate_verdict,
    saturation_rate,
    slo_verdict,
)
from howfast.errors import UsageError
from howfast.rates import parse_slo

RATES = [100, 250, 500, 700, 800, 900, 1000, 1100]


def test_flat_then_rising_knee_is_the_last_flat_rate():
    latency = [2.0, 2.1, 2.0, 2.2, 2.3, 6.0, 25.0, 140.0]
    knee = find_knee(list(zip(RATES, latency, strict=True)))
    assert knee.rate == 800 and knee.first_rising_rate == 900
    assert knee.baseline_ms == pytest.approx(2.05)


def test_always_flat_has_no_knee():
    knee = find_knee([(r, 1.0 + 0.05 * (i % 2)) for i, r in enumerate(RATES)])
    assert knee.rate is None and "stayed within" in knee.how


def test_noisy_curve_ignores_a_lone_spike_in_the_flat_part():
    rng = random.Random(7)
    latency = [2.0 + rng.uniform(-0.2, 0.2) for _ in RATES[:6]] + [9.0, 40.0]
    latency[2] = 7.5  # one disturbed measurement, back to normal right after
    knee = find_knee(list(zip(RATES, latency, strict=True)))
    assert knee.rate == 900


def test_steady_climb_and_early_rise_and_too_few_points():
    # A steady climb turns up where it passes 1.5x the lowest rate's latency.
    assert find_knee([(100, 50.0), (200, 60.0), (300, 70.0), (400, 80.0)]).rate == 300
    # Rising right after the lowest rate: the lowest rate is the knee.
    early = find_knee([(1, 1.0), (2, 10.0), (3, 20.0)])
    assert (early.rate, early.first_rising_rate) == (1, 2)
    too_few = find_knee([(1, 1.0), (2, 9.0)])
    assert too_few.rate is None and "fewer than 3" in too_few.how


def test_rate_verdicts():
    assert rate_verdict(RatePoint(1000, 998, 2.0, lag_avg_ms=0.1)).met
    short = rate_verdict(RatePoint(1000, 700, 2.0, lag_avg_ms=0.1))
    assert not short.met and "70%" in short.reason
    lagging = rate_verdict(RatePoint(1000, 990, 2.0, lag_avg_ms=300.0))
    assert not lagging.met and "lag" in lagging.reason
    skipped = rate_verdict(RatePoint(1000, 990, 2.0, skipped=12))
    assert not skipped.met and "skipped" in skipped.reason
    growing = RatePoint(1000, 990, 2.0, lag_avg_ms=5.0, lag_series_ms=(0.1, 0.2, 2, 4, 8, 16))
    assert not rate_verdict(growing).met


def test_lag_that_rises_with_slower_transactions_but_stays_tolerated_is_met():
    """A loaded clean-clone run's 3 s step at a tenth of capacity: the machine slowed during
    it (12.3 ms a transaction, 3 ms in the full-speed step), so the lag rose, 0.36, 2.7 then
    9.8 ms, without ever reaching what the average is allowed (2 x 12.3 ms)."""
    slowed = RatePoint(33.6, 28.4, 12.3, lag_avg_ms=4.3, lag_series_ms=(0.36, 2.7, 9.8),
                       duration_s=3.0)  # fmt: skip
    assert rate_verdict(slowed).met, rate_verdict(slowed).reason
    # The same rise past that level is a backlog.
    piling = RatePoint(33.6, 28.4, 12.3, lag_avg_ms=12.0, lag_series_ms=(0.36, 8.0, 30.0),
                       duration_s=3.0)  # fmt: skip
    verdict = rate_verdict(piling)
    assert not verdict.met and verdict.reason == "schedule lag kept growing during the step"


def test_lag_growing():
    assert lag_growing([0.1, 0.5, 1.0, 2.0, 4.0, 8.0])
    assert not lag_growing([0.2, 0.1, 0.3, 0.2, 0.1, 0.2])  # small wobble
    assert not lag_growing([5.0, 5.1, 4.9])
    assert lag_growing([0.2, 300.0, 700.0])  # a 3 s step far above capacity: a linear backlog
    assert lag_growing([0.1, 0.1, 0.9, 1.8, 2.7, 3.6])
    # One stall at the end of a step that kept up: only the last third rises.
    assert not lag_growing([0.05, 0.06, 2.5])
    assert not lag_growing([0.1, 0.2, 0.1, 0.2, 0.1, 9.0])
    # Under the floor it is given, a rise is not growth.
    assert lag_growing([0.36, 2.7, 9.8]) and not lag_growing([0.36, 2.7, 9.8], floor_ms=24.6)


def test_saturation_is_highest_met_rate():
    points = [
        RatePoint(500, 500, 1.0, 0.1),
        RatePoint(1000, 995, 1.5, 0.3),
        RatePoint(2000, 1400, 30.0, 900.0),
    ]
    assert saturation_rate(points) == 1000
    assert saturation_rate(points[2:]) is None


@pytest.mark.parametrize(
    ("text", "metric", "limit"),
    [
        ("p99=10ms", "latency_p99_ms", 10.0),
        ("p95 = 2.5ms", "latency_p95_ms", 2.5),
        ("avg=500us", "latency_avg_ms", 0.5),
        ("p99.9=1s", "latency_p999_ms", 1000.0),
        ("p50=3", "latency_p50_ms", 3.0),
    ],
)
def test_parse_slo(text: str, metric: str, limit: float):
    slo = parse_slo(text)
    assert (slo.metric, slo.limit_ms) == (metric, pytest.approx(limit))


@pytest.mark.parametrize("bad", ["p98=10ms", "p99", "p99=ten", "p99=0ms", "p99=-1ms"])
def test_bad_slo(bad: str):
    with pytest.raises(UsageError, match="--slo"):
        parse_slo(bad)


def test_slo_needs_the_rate_to_be_met():
    slo = parse_slo("p99=10ms")
    fast = {"latency_p99_ms": 4.0}
    assert slo_verdict(slo, fast, rate_met=True)["slo_met"] is True
    # Fast transactions do not count when the rate was not achieved.
    assert slo_verdict(slo, fast, rate_met=False)["slo_met"] is False
    slow = slo_verdict(slo, {"latency_p99_ms": 12.0}, rate_met=True)
    assert slow["slo_met"] is False and slow["slo_value_ms"] == 12.0
    assert slo_verdict(slo, {}, rate_met=True)["slo_met"] is False
    assert highest_rate_meeting([(500, True), (1000, True), (2000, False)]) == 1000
    assert highest_rate_meeting([(500, False)]) is None


def test_short_steps_allow_for_the_scatter_of_a_random_schedule():
    # 2 s at 100/s: ~200 transactions, a count that scatters by about 7% by chance alone.
    assert rate_verdict(RatePoint(100, 90, 2.0, lag_avg_ms=0.1, duration_s=2)).met
    # 30 s at 10000/s: 300000 transactions, so the 95% floor applies.
    long = rate_verdict(RatePoint(10000, 9000, 2.0, lag_avg_ms=0.1, duration_s=30))
    assert not long.met and "< 95%" in long.reason
