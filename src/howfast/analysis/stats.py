"""Statistics over repetitions: summary figures, a confidence interval, Welch's t-test and the
stability warnings. Pure functions of the values; see docs/statistics.md for the definitions.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

CONFIDENCE = 0.95
ALPHA = 0.05  # a difference is significant when Welch's p-value is below this
SPREAD_LIMIT = 0.10  # coefficient of variation above this: the mean is not a steady figure
RANGE_LIMIT = 0.50  # max more than this far above min: one repetition differs from another


@dataclass(frozen=True)
class Stats:
    """One metric over n repetitions.

    stdev is the sample standard deviation (n - 1); cv = stdev / mean; [ci_low, ci_high] is
    the 95% confidence interval of the mean from Student's t with n - 1 degrees of freedom.
    Those need two values or more and are None below that.
    """

    values: tuple[float, ...]
    mean: float
    median: float
    stdev: float | None
    cv: float | None
    ci_low: float | None
    ci_high: float | None

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def min(self) -> float:
        return min(self.values)

    @property
    def max(self) -> float:
        return max(self.values)

    @property
    def ci_half(self) -> float | None:
        """Half the width of the confidence interval: the '± x' after the mean."""
        return None if self.ci_high is None else self.ci_high - self.mean

    def document(self) -> dict[str, float | int | None]:
        return {
            "n": self.n,
            "mean": self.mean,
            "median": self.median,
            "stdev": self.stdev,
            "cv": self.cv,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "min": self.min,
            "max": self.max,
        }


def t_quantile(p: float, df: float) -> float:
    """Student's t distribution: the value below which a share p of it lies."""
    # Imported here: scipy.special costs half a second, and most commands never need it.
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def t_two_sided_p(t: float, df: float) -> float:
    """The chance of a |t| at least this large when the means are equal."""
    from scipy.special import stdtr

    return float(2 * stdtr(df, -abs(t)))


def describe(values: Iterable[float], confidence: float = CONFIDENCE) -> Stats:
    """Summary statistics of finite values; ValueError when there are none."""
    clean = tuple(float(v) for v in values if math.isfinite(v))
    if not clean:
        raise ValueError("no values to describe")
    mean = statistics.fmean(clean)
    median = statistics.median(clean)
    if len(clean) < 2:
        return Stats(clean, mean, median, None, None, None, None)
    stdev = statistics.stdev(clean)
    cv = stdev / abs(mean) if mean else None
    half = t_quantile((1 + confidence) / 2, len(clean) - 1) * stdev / math.sqrt(len(clean))
    return Stats(clean, mean, median, stdev, cv, mean - half, mean + half)


@dataclass(frozen=True)
class Welch:
    """Welch's unequal-variances t-test of two means."""

    t: float
    df: float
    p_value: float

    @property
    def significant(self) -> bool:
        return self.p_value < ALPHA


def welch(a: Stats, b: Stats) -> Welch | None:
    """The test, or None when it cannot be made: fewer than two values on a side, or no spread
    on either side (the t statistic would divide by zero)."""
    if a.n < 2 or b.n < 2 or a.stdev is None or b.stdev is None or not (a.stdev or b.stdev):
        return None
    va, vb = a.stdev**2 / a.n, b.stdev**2 / b.n  # squared standard errors of the means
    t = (a.mean - b.mean) / math.sqrt(va + vb)
    # Welch–Satterthwaite: the degrees of freedom of a difference of unequal variances.
    df = (va + vb) ** 2 / (va**2 / (a.n - 1) + vb**2 / (b.n - 1))
    return Welch(t=t, df=df, p_value=t_two_sided_p(t, df))


def stability_warnings(s: Stats) -> list[str]:
    """Why the mean of these repetitions should not be trusted on its own."""
    warnings = []
    if s.cv is not None and s.cv > SPREAD_LIMIT:
        warnings.append(
            f"spread {s.cv:.1%} of the mean (above {SPREAD_LIMIT:.0%}) over {s.n} repetitions"
        )
    if s.n >= 2 and s.min > 0 and (s.max - s.min) / s.min > RANGE_LIMIT:
        warnings.append(
            f"min and max {(s.max - s.min) / s.min:.0%} apart (above {RANGE_LIMIT:.0%})"
        )
    return warnings
