"""Statistics over repetitions, against values worked out by hand and scipy.stats as reference."""

from __future__ import annotations

import math

import pytest
from scipy import stats as reference

from howfast.analysis.stats import describe, stability_warnings, welch
from howfast.analysis.steady import MIN_POINTS, steady_state
from howfast.model import Sample


def test_describe_by_hand() -> None:
    s = describe([10.0, 12.0, 11.0])
    assert (s.n, s.mean, s.median, s.min, s.max) == (3, 11.0, 11.0, 10.0, 12.0)
    assert s.stdev == pytest.approx(1.0)  # sqrt(((-1)² + 1² + 0²) / (3 - 1))
    assert s.cv == pytest.approx(1 / 11)
    # t(0.975, 2 degrees of freedom) = 4.302652729911275, from a table of Student's t.
    half = 4.302652729911275 * 1.0 / math.sqrt(3)
    assert s.ci_half == pytest.approx(half)
    assert (s.ci_low, s.ci_high) == (pytest.approx(11 - half), pytest.approx(11 + half))


@pytest.mark.parametrize(
    "values",
    [
        [1520.3, 1498.1, 1533.9, 1510.0],
        [0.412, 0.398, 0.455],
        [20512.3, 19876.0, 21003.5, 20440.1, 19999.9, 20321.7, 20654.2],
    ],
)
def test_describe_matches_scipy(values: list[float]) -> None:
    s = describe(values)
    assert s.mean == pytest.approx(reference.tmean(values))
    assert s.stdev == pytest.approx(reference.tstd(values))
    low, high = reference.t.interval(0.95, len(values) - 1, loc=s.mean, scale=reference.sem(values))
    assert (s.ci_low, s.ci_high) == (pytest.approx(low), pytest.approx(high))


def test_one_value_has_no_spread() -> None:
    s = describe([42.0])
    assert (s.n, s.mean, s.median) == (1, 42.0, 42.0)
    assert s.stdev is s.cv is s.ci_low is s.ci_high is s.ci_half is None


def test_describe_skips_nan_and_refuses_nothing() -> None:
    assert describe([1.0, math.nan, 3.0]).n == 2
    with pytest.raises(ValueError):
        describe([math.nan])


def test_welch_by_hand() -> None:
    # means 2 and 16/3, variances 1 and 7/3: t = (2 - 16/3) / sqrt(1/3 + 7/9)
    test = welch(describe([1.0, 2.0, 3.0]), describe([4.0, 5.0, 7.0]))
    assert test is not None
    se2 = 1 / 3 + 7 / 9
    assert test.t == pytest.approx((2 - 16 / 3) / math.sqrt(se2))
    assert test.df == pytest.approx(se2**2 / ((1 / 3) ** 2 / 2 + (7 / 9) ** 2 / 2))
    assert test.p_value == pytest.approx(0.0419145, abs=1e-6)
    assert test.significant


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([1000.0, 1010.0, 990.0], [1100.0, 1095.0, 1110.0]),
        ([1000.0, 1050.0, 950.0], [1010.0, 960.0, 1060.0]),
        ([5.1, 4.9, 5.0, 5.2, 4.8], [5.3, 5.6]),
        ([0.5, 0.7], [0.6, 0.9, 0.4, 0.8]),
    ],
)
def test_welch_matches_scipy(a: list[float], b: list[float]) -> None:
    expected = reference.ttest_ind(a, b, equal_var=False)
    test = welch(describe(a), describe(b))
    assert test is not None
    assert test.t == pytest.approx(float(expected.statistic))
    assert test.df == pytest.approx(float(expected.df))
    assert test.p_value == pytest.approx(float(expected.pvalue))


def test_welch_cannot_judge_one_repetition_or_no_spread() -> None:
    assert welch(describe([1.0]), describe([2.0, 3.0])) is None
    assert welch(describe([2.0, 2.0]), describe([3.0, 3.0])) is None
    # One side without spread is fine: the other side's variance carries the test.
    assert welch(describe([2.0, 2.0]), describe([3.0, 3.5])) is not None


def test_stability_warnings() -> None:
    assert stability_warnings(describe([100.0, 101.0, 99.0])) == []
    spread = stability_warnings(describe([100.0, 80.0, 120.0]))  # CV 20%
    assert spread == ["spread 20.0% of the mean (above 10%) over 3 repetitions"]
    both = stability_warnings(describe([100.0, 100.0, 170.0]))
    assert any(w.startswith("spread") for w in both)
    assert "min and max 70% apart (above 50%)" in both
    assert stability_warnings(describe([100.0])) == []


def _series(values: list[float]) -> dict[str, list[Sample]]:
    return {"tps": [Sample(float(t), v) for t, v in enumerate(values, start=1)]}


def test_steady_state_leaves_out_the_ramp() -> None:
    values = [10.0, 50.0, 90.0, 100.0, 101.0, 99.0, 100.0, 102.0, 98.0, 100.0, 100.0, 101.0]
    steady = steady_state(_series(values))
    assert steady is not None
    # The second half's median is 100; 90 is the first second within 10% of it.
    assert (steady.skipped_points, steady.skipped_s, steady.settled) == (2, 2.0, True)
    assert steady.tps == pytest.approx(sum(values[2:]) / 10)


def test_steady_state_never_leaves_out_more_than_half() -> None:
    steady = steady_state(_series([10.0] * 7 + [100.0] * 5))
    assert steady is not None
    assert (steady.skipped_points, steady.settled) == (6, False)


def test_steady_latency_weighs_seconds_by_their_transactions() -> None:
    series = _series([100.0] * 5 + [300.0] * 5)
    series["latency_ms"] = [Sample(float(t), 2.0 if t <= 5 else 1.0) for t in range(1, 11)]
    steady = steady_state(series)
    assert steady is not None
    assert steady.skipped_points == 5  # the median of the second half is 300
    assert steady.latency_avg_ms == pytest.approx(1.0)
    assert steady_state(_series([100.0] * (MIN_POINTS - 1))) is None
