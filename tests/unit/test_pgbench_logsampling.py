"""The per-transaction log's sampling rate, chosen from the expected rate (pure)."""

from __future__ import annotations

import pytest

from howfast.model import JSONValue, StepRecord
from howfast.workloads.pgbench.logsampling import (
    CALIBRATION_S,
    LOG_LINES_PER_S,
    PROGRESS_MAX_TPS,
    LogPlan,
    calibration_params,
    expected_tps,
    pgbench_progress,
    plan_from_calibration,
    plan_from_history,
    sampling_rate,
    wants_sampling,
)
from tests.unit.stored_runs import STARTED


def step(tps: float, clients: int, status: str = "completed", **params: JSONValue) -> StepRecord:
    asked: dict[str, JSONValue] = {"mode": "select-only", "clients": clients, "duration_s": 10}
    asked.update(params)
    return StepRecord("/t", "pgbench", asked, status, STARTED, STARTED, metrics={"tps": tps})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tps", "rate"),
    [(1.0, None), (0.75, None), (2.0, 0.5), (15.0, 0.0666), (1500.0, 0.000666)],
)
def test_sampling_rate_keeps_the_log_under_the_budget(tps, rate):
    tps *= LOG_LINES_PER_S  # in budgets
    got = sampling_rate(tps)
    assert got == rate
    if got is not None:
        assert got * tps <= LOG_LINES_PER_S  # rounded down: never above the budget
        assert got * tps > LOG_LINES_PER_S * 0.99  # 3 significant digits: close to it


def test_expected_rate_from_the_same_test_same_clients_first():
    params: dict[str, JSONValue] = {"mode": "select-only", "clients": 4, "duration_s": 10}
    history = [step(9000, 4), step(5000, 2), step(1.0, 4, mode="tpcb-like")]
    assert expected_tps(params, history) == 9000  # the latest of the same clients
    assert expected_tps(params, history[1:2]) == 10000  # 2 clients, scaled by 4 / 2
    # Other tests, failed steps and fixed-rate steps say nothing about this one.
    others = [
        step(1.0, 4, mode="tpcb-like"),
        step(1.0, 4, "failed"),
        step(1.0, 4, rate=100.0),
        step(1.0, 4, protocol="prepared"),
    ]
    assert expected_tps(params, others) is None


def test_nearest_client_count_is_chosen():
    params: dict[str, JSONValue] = {"mode": "select-only", "clients": 4}
    assert expected_tps(params, [step(1000, 1), step(6000, 8)]) == 3000  # 8 is nearer than 1


def test_plan_from_history_offered_rate_earlier_step_or_calibration():
    params: dict[str, JSONValue] = {"mode": "select-only", "clients": 2, "duration_s": 10}
    assert plan_from_history(params, []) is None  # nothing known: calibrate
    by_rate = plan_from_history({**params, "rate": LOG_LINES_PER_S * 5.0}, [])
    assert by_rate is not None and by_rate.sampling_rate == 0.2
    assert by_rate.resolved()["log_sampling_basis"] == "offered rate"
    by_step = plan_from_history(params, [step(LOG_LINES_PER_S * 10, 2)])
    assert by_step is not None and by_step.sampling_rate == 0.1
    assert by_step.resolved() == {
        "log_sampling_rate": 0.1,
        "log_expected_tps": LOG_LINES_PER_S * 10.0,
        "log_sampling_basis": "earlier step",
    }
    full = plan_from_history({**params, "latency_log": "full"}, [step(20000, 2)])
    assert full is not None and full.sampling_rate is None
    assert full.resolved()["log_sampling_rate"] == 1.0


def test_few_transactions_are_all_logged_without_calibration():
    few: dict[str, JSONValue] = {"mode": "select-only", "clients": 2, "transactions": 100}
    many: dict[str, JSONValue] = {**few, "transactions": LOG_LINES_PER_S * 10}
    assert not wants_sampling(few) and wants_sampling(many)
    plan = plan_from_history(few, [])
    assert plan is not None and plan.sampling_rate is None
    assert plan_from_history(many, []) is None


def test_calibration_params_and_plan():
    params: dict[str, JSONValue] = {"mode": "tpcb-like", "clients": 2, "transactions": 10**6}
    assert calibration_params(params) == {
        "mode": "tpcb-like",
        "clients": 2,
        "duration_s": CALIBRATION_S,
    }
    assert calibration_params({**params, "duration_s": 1})["duration_s"] == 1
    assert plan_from_calibration(LOG_LINES_PER_S * 20).sampling_rate == 0.05
    assert plan_from_calibration(None).sampling_rate is None


@pytest.mark.parametrize(
    ("expected", "follows", "progress"),
    [
        (None, True, True),  # no expected rate: pgbench's progress lines
        (PROGRESS_MAX_TPS, True, True),
        (PROGRESS_MAX_TPS + 1, True, False),  # client-bound rates: the log's series
        (50_000.0, False, True),  # a log that cannot be followed live (a pod): -P 1
    ],
)
def test_pgbench_progress_is_left_out_only_at_high_rates_on_a_followed_log(
    expected: float | None, follows: bool, progress: bool
) -> None:
    plan = LogPlan(sampling_rate(expected) if expected else None, expected, "calibration")
    assert pgbench_progress(plan, follows) is progress
