"""How far a latency percentile can be trusted, from the number of transactions behind it.

A percentile computed from n latencies (every transaction of a run, or pgbench's random sample
of them under --sampling-rate) has a distribution-free 95% confidence interval between two
order statistics: the number of the n values below the true p-th percentile is Binomial(n, p),
so the values at ranks `binom.ppf(0.025, n, p)` and `binom.ppf(0.975, n, p) + 1` bracket it
with at least 95% probability. When the upper rank is beyond n, no sample bounds the
percentile from above: the figure is a guess about the tail, e.g. a p99.9 from fewer than
3,688 transactions. Such percentiles are named in `latency_too_few_samples` and a warning,
derived when a run is read.

Pure.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Mapping, Sequence

from howfast.model import JSONValue

# metric name -> percentile, as pgbench steps report them (workloads/pgbench/txlog.py)
PERCENTILES: dict[str, float] = {
    "latency_p50_ms": 50,
    "latency_p90_ms": 90,
    "latency_p95_ms": 95,
    "latency_p99_ms": 99,
    "latency_p999_ms": 99.9,
}
CONFIDENCE = 0.95
SAMPLES_METRIC = "latency_samples"
SHORT_METRIC = "latency_too_few_samples"


def label(p: float) -> str:
    """'p99.9' for 99.9."""
    return f"p{p:g}"


def min_samples(p: float, confidence: float = CONFIDENCE) -> int:
    """The fewest values whose largest still bounds the p-th percentile from above at this
    confidence: the smallest n with (p/100)^n <= (1 - confidence) / 2."""
    q = p / 100
    if q <= 0:
        return 1
    return math.ceil(math.log((1 - confidence) / 2) / math.log(q) - 1e-9)


def rank_interval(n: int, p: float, confidence: float = CONFIDENCE) -> tuple[int, int | None]:
    """1-based ranks (among n sorted values) of the confidence interval's bounds for the p-th
    percentile; the upper one is None when no sample bounds it (n < min_samples(p))."""
    if n < 1:
        raise ValueError("an interval needs at least one value")
    alpha = 1 - confidence
    lower, upper = binomial_quantiles((alpha / 2, 1 - alpha / 2), n, p / 100)
    low = max(1, lower)
    high = upper + 1
    return low, high if high <= n else None


# A probability this many times smaller than the most likely count's moves no quantile: the
# counts beyond it are left out of the sums below.
NEGLIGIBLE = 1e-40


def binomial_quantiles(levels: Sequence[float], n: int, q: float) -> list[int]:
    """For each level (0 < level < 1), the smallest k in 0..n whose Binomial(n, q) CDF reaches
    it: what scipy's `binom.ppf(level, n, q)` gives. Pure Python: every run with a pgbench
    step computes these, and importing scipy for them cost each run 0.2 s (scipy.special)
    to 0.8 s (scipy.stats) of CPU. The probabilities are summed relative to the most likely
    count's, each from its neighbour's by the ratio of binomial coefficients, and divided by
    their total: no factorial or gamma function, whose rounding grows with n."""
    if q <= 0 or q >= 1:
        return [0 if q <= 0 else n for _ in levels]
    odds = q / (1 - q)
    mode = min(n, math.floor((n + 1) * q))
    below: list[float] = []  # P(mode - 1) / P(mode), P(mode - 2) / P(mode), ...
    weight, k = 1.0, mode
    while k > 0:
        weight *= k / ((n - k + 1) * odds)
        k -= 1
        if weight < NEGLIGIBLE:
            break
        below.append(weight)
    above: list[float] = []  # P(mode + 1) / P(mode), ...
    weight, k = 1.0, mode
    while k < n:
        weight *= (n - k) * odds / (k + 1)
        k += 1
        if weight < NEGLIGIBLE:
            break
        above.append(weight)
    weights = [*reversed(below), 1.0, *above]
    total = math.fsum(weights)
    cdf = [c / total for c in itertools.accumulate(weights)]
    lowest = mode - len(below)
    return [lowest + bisect.bisect_left(cdf, level) if level <= cdf[-1] else n for level in levels]


def too_few_samples(metrics: Mapping[str, JSONValue]) -> list[str]:
    """The percentile metrics of a step whose 95% interval is unbounded above (see the module
    doc); [] when the step does not say how many transactions they came from."""
    samples = metrics.get(SAMPLES_METRIC)
    if not isinstance(samples, int) or isinstance(samples, bool):
        return []
    return [
        name
        for name, p in PERCENTILES.items()
        if isinstance(metrics.get(name), int | float) and samples < min_samples(p)
    ]


def too_few_warning(metrics: Mapping[str, JSONValue], short: list[str]) -> str | None:
    """The warning that goes with too_few_samples(metrics)."""
    if not short:
        return None
    samples = metrics.get(SAMPLES_METRIC)
    names = ", ".join(label(PERCENTILES[name]) for name in short)
    needs = max(min_samples(PERCENTILES[name]) for name in short)
    return (
        f"{names} latency from {samples:,} transactions only: too few to bound it "
        f"(a 95% interval needs at least {needs:,}); run longer or log more transactions"
    )
