"""A latency percentile's confidence interval from its sample size (analysis/percentiles.py)
and the interval computed from a histogram (workloads/pgbench/txlog.py)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from howfast.analysis.derive import derive_step
from howfast.analysis.percentiles import (
    PERCENTILES,
    binomial_quantiles,
    min_samples,
    rank_interval,
    too_few_samples,
    too_few_warning,
)
from howfast.model import JSONValue, StepRecord
from howfast.workloads.pgbench.txlog import latency_intervals, latency_metrics
from tests.unit.stored_runs import STARTED


@pytest.mark.parametrize("p", list(PERCENTILES.values()))
def test_min_samples_is_where_the_upper_bound_appears(p):
    n = min_samples(p)
    assert rank_interval(n, p)[1] is not None
    assert rank_interval(n - 1, p)[1] is None


@pytest.mark.parametrize("p", [*PERCENTILES.values(), 1, 99.99])
def test_the_binomial_quantiles_are_scipys(p):
    """Summed in pure Python, the quantiles are binom.ppf's, small and large samples alike."""
    from scipy.stats import binom

    levels = (0.005, 0.025, 0.975, 0.995)
    for n in [*range(1, 400), 3687, 3688, 12_345, 99_999, 1_000_000, 25_000_000]:
        expected = [int(binom.ppf(level, n, p / 100)) for level in levels]
        assert binomial_quantiles(levels, n, p / 100) == expected, n
    assert binomial_quantiles(levels, 10, 0) == [0] * 4
    assert binomial_quantiles(levels, 10, 1) == [10] * 4


def test_intervals_import_no_scipy():
    """Every run with a pgbench step computes them: scipy would cost it 0.2-0.8 s of CPU."""
    code = (
        "import sys\n"
        "from howfast.workloads.pgbench.txlog import latency_intervals\n"
        "assert latency_intervals({100: 5000, 200: 3000})['latency_p99_ci_high_ms']\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_p999_needs_thousands_of_samples():
    assert 3000 < min_samples(99.9) < 4000
    assert 300 < min_samples(99) < 400


def test_interval_covers_the_true_percentile_about_95_percent_of_the_time():
    """Draw many samples of a known distribution: the order-statistic interval must contain
    the true p99 in at least ~95% of them (it is conservative: discrete ranks)."""
    rng = np.random.default_rng(17)
    true_p99 = -np.log(0.01)  # exponential(1)
    n, trials, covered = 2000, 400, 0
    low_rank, high_rank = rank_interval(n, 99)
    assert high_rank is not None
    for _ in range(trials):
        values = np.sort(rng.exponential(size=n))
        covered += values[low_rank - 1] <= true_p99 <= values[high_rank - 1]
    assert covered / trials >= 0.92


def test_latency_intervals_bracket_the_percentiles():
    rng = np.random.default_rng(3)
    latencies = rng.integers(100, 5000, size=5000)
    hist = {int(v): int(c) for v, c in zip(*np.unique(latencies, return_counts=True), strict=True)}
    metrics = latency_metrics(hist)
    intervals = latency_intervals(hist)
    assert intervals["latency_samples"] == 5000
    for name in PERCENTILES:
        stem = name.removesuffix("_ms")
        assert intervals[f"{stem}_ci_low_ms"] <= metrics[name] <= intervals[f"{stem}_ci_high_ms"]
    small = latency_intervals(dict(list(hist.items())[:50]))
    assert "latency_p999_ci_high_ms" not in small and "latency_p50_ci_high_ms" in small
    assert latency_intervals({}) == {}


def test_too_few_samples_is_derived_when_read():
    metrics: dict[str, JSONValue] = {
        "tps": 200.0,
        "latency_p50_ms": 1.0,
        "latency_p99_ms": 3.0,
        "latency_p999_ms": 9.0,
        "latency_samples": 2000,
    }
    assert too_few_samples(metrics) == ["latency_p999_ms"]
    warning = too_few_warning(metrics, ["latency_p999_ms"])
    assert warning is not None and "p99.9" in warning and "2,000" in warning
    asked: dict[str, JSONValue] = {"mode": "select-only", "clients": 2, "duration_s": 10}
    stored = StepRecord("/t", "pgbench", asked, "completed", STARTED, STARTED, metrics=metrics)
    derived = derive_step(stored, [])
    assert derived.metrics["latency_too_few_samples"] == ["latency_p999_ms"]
    assert warning in derived.warnings
    assert "latency_too_few_samples" not in stored.metrics  # nothing frozen in the record
    enough = derive_step(
        StepRecord("/t", "pgbench", asked, "completed", STARTED, STARTED,
                   metrics={**metrics, "latency_samples": 5000}), [])  # fmt: skip
    assert "latency_too_few_samples" not in enough.metrics
    assert not any("too few" in w for w in enough.warnings)
    # A step stored before sample counts were kept says nothing.
    assert too_few_samples({k: v for k, v in metrics.items() if k != "latency_samples"}) == []
