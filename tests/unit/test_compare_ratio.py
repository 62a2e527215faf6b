"""`compare`'s sentence: the ratio of two means with its 95% interval (Fieller's, with Welch's
degrees of freedom), "significant", or "no difference found within N%" for `--until` runs;
and one run's targets compared with each other."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from howfast.analysis.compare import compare_runs, compare_targets, difference, ratio_interval
from howfast.analysis.stats import describe, t_quantile, welch
from howfast.cli.app import cli
from howfast.model import RunRecord, StepRecord
from tests.unit.stored_runs import open_temp_store, pgbench, store_run


def test_the_interval_leaves_out_1_exactly_when_welch_finds_a_difference() -> None:
    rng = np.random.default_rng(17)
    seen = {True: 0, False: 0}
    for _ in range(400):
        n_a, n_b = rng.integers(3, 12, size=2)
        a = describe(rng.normal(1000, rng.uniform(5, 80), n_a))
        b = describe(rng.normal(1000 * rng.uniform(0.95, 1.05), rng.uniform(5, 80), n_b))
        test = welch(a, b)
        assert test is not None
        interval = ratio_interval(a, b, test.df)
        assert interval is not None
        low, high = interval
        assert low < b.mean / a.mean < high
        seen[test.significant] += 1
        assert (low > 1 or high < 1) == test.significant
    assert seen[True] > 20 and seen[False] > 20  # both kinds were tried


def test_with_a_steady_baseline_the_interval_is_the_other_runs_over_its_mean() -> None:
    base = describe([1000.0, 1000.0, 1000.0])
    other = describe([1290.0, 1320.0, 1350.0, 1310.0])
    test = welch(base, other)
    assert test is not None and test.df == pytest.approx(3)
    half = t_quantile(0.975, 3) * other.stdev / 2  # type: ignore[operator]
    low, high = ratio_interval(base, other, test.df) or (0, 0)
    assert low == pytest.approx((other.mean - half) / 1000)
    assert high == pytest.approx((other.mean + half) / 1000)


def test_an_unbounded_interval_is_none() -> None:
    base = describe([1.0, -1.0, 2.0])  # the baseline's mean is not clearly away from zero
    assert ratio_interval(base, describe([5.0, 6.0, 7.0]), 2.0) is None


def test_a_significant_difference_is_one_sentence() -> None:
    base = describe([1000.0, 1010.0, 990.0, 1005.0])
    other = describe([1320.0, 1330.0, 1310.0, 1325.0])
    d = difference(base, other, True, names=("/mnt/b", "/mnt/a"))
    assert d.significant and d.ratio_ci is not None
    low, high = d.ratio_ci
    assert d.statement == (
        f"/mnt/b is {d.ratio:.2f}x /mnt/a (95% CI {low:.2f}-{high:.2f}), significant (better)"
    )
    worse = difference(other, base, True, names=("/mnt/a", "/mnt/b"))
    assert worse.statement.endswith("significant (worse)")
    document = d.document()
    assert document["ratio_ci_low"] == low and document["statement"] == d.statement


def test_no_difference_within_the_width_asked() -> None:
    base = describe([1000.0, 1004.0, 996.0, 1001.0, 999.0])
    other = describe([1001.0, 997.0, 1003.0, 1000.0, 998.0])
    d = difference(base, other, True, names=("B", "A"), width=0.02)
    assert d.significant is False and d.within == 0.02
    assert d.statement.startswith("no difference found within 2% (95% CI 0.99")
    # the same data, a width the interval does not fit in: no such claim
    tight = difference(base, other, True, names=("B", "A"), width=0.001)
    assert tight.within is None
    assert tight.statement.startswith("no significant difference: B is 1.000x A (95% CI 0.99")
    assert "a difference of up to 0.4% is not ruled out" in tight.statement
    # without a width (a --repeat run) the interval is said, never "within"
    assert difference(base, other, True).within is None


def test_wide_intervals_say_what_is_not_ruled_out() -> None:
    base = describe([1000.0, 1300.0, 800.0])
    other = describe([1100.0, 900.0, 1250.0])
    d = difference(base, other, True, names=("B", "A"), width=0.02)
    assert d.within is None and d.significant is False
    assert d.ratio_ci is not None
    largest = max(1 - d.ratio_ci[0], d.ratio_ci[1] - 1)
    assert d.statement.endswith(f"a difference of up to {largest:.1%} is not ruled out")


UNTIL = {"ci": 0.05, "min": 3, "max": 30, "budget_s": None}


def interleaved_run(a: list[float], b: list[float]) -> list[StepRecord]:
    steps = []
    for r, (x, y) in enumerate(zip(a, b, strict=True), start=1):
        steps.append(pgbench("/mnt/a", x, repetition=r, until=UNTIL))
        steps.append(pgbench("/mnt/b", y, repetition=r, until=UNTIL))
    return steps


def test_one_runs_targets_compared(tmp_path: Path) -> None:
    db = open_temp_store(tmp_path)
    store = str(tmp_path / "results.db")
    steps = interleaved_run([1000.0, 1010.0, 990.0], [1320.0, 1330.0, 1310.0])
    run_id = store_run(db, steps, targets=["/mnt/a", "/mnt/b"])
    run = db.get_run(run_id)
    assert isinstance(run, RunRecord)
    comparison = compare_targets(run)
    assert [r.name for r in comparison.runs] == ["/mnt/a", "/mnt/b"]
    (test,) = comparison.tests
    assert [g.n if g else 0 for g in test.groups] == [3, 3]
    tps = next(m for m in test.metrics if m.metric == "tps")
    d = tps.differences[1]
    assert d is not None and d.statement.startswith("/mnt/b is 1.32x /mnt/a (95% CI 1.")
    with pytest.raises(ValueError, match="two targets"):
        compare_targets(RunRecord(1, "p", "completed", "t", "t", {}, run.targets[:1], []))

    result = CliRunner().invoke(cli, ["compare", str(run_id), "--store", store, "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [r["target"] for r in document["runs"]] == ["/mnt/a", "/mnt/b"]
    shown = CliRunner().invoke(cli, ["compare", str(run_id), "--store", store])
    assert "/mnt/b is 1.32x /mnt/a (95% CI" in shown.output.replace("\n", " ")

    single = store_run(db, steps[::2], targets=["/mnt/a"])
    refused = CliRunner().invoke(cli, ["compare", str(single), "--store", store])
    assert refused.exit_code != 0 and "has one target" in str(refused.exception)
    db.close()


def test_until_runs_compared_across_runs_say_within(tmp_path: Path) -> None:
    db = open_temp_store(tmp_path)
    a = store_run(db, interleaved_run([1000.0, 1002.0, 998.0, 1001.0], [1.0] * 4)[::2])
    b = store_run(db, interleaved_run([1001.0, 999.0, 1000.0, 1000.5], [1.0] * 4)[::2])
    runs = [db.get_run(a), db.get_run(b)]
    comparison = compare_runs([r for r in runs if r is not None])
    tps = next(m for m in comparison.tests[0].metrics if m.metric == "tps")
    d = tps.differences[1]
    assert d is not None and d.within == 0.05
    assert d.statement.startswith("no difference found within 5% (95% CI ")
    db.close()
