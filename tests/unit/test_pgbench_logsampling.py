"""The per-transaction log's sampling rate, chosen from the expected rate (pure)."""

from __future__ import annotations

import pytest

from howfast.model import JSONValue, StepRecord
from howfast.workloads.pgbench.logsampling import (
    CALIBRATION_S,
    LOG_LINES_PER_S,
    PROBE_TPS_SHARE,
    PROGRESS_MAX_TPS,
    LogPlan,
    calibration_params,
    expected_tps,
    pgbench_progress,
    plan_from_calibration,
    plan_from_history,
    plan_from_round_trip,
    probe_predicts,
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


def test_one_select_only_client_takes_its_rate_from_the_round_trip_probe():
    params: dict[str, JSONValue] = {"mode": "select-only", "clients": 1, "duration_s": 10}
    assert plan_from_history(params, []) is None  # nothing earlier: the probe is asked
    plan = plan_from_round_trip(params, 0.02)  # 20 us a round trip: 50,000/s
    expected = PROBE_TPS_SHARE * 50_000
    assert plan == LogPlan(sampling_rate(expected), expected, "round-trip probe")
    assert plan.resolved()["log_sampling_basis"] == "round-trip probe"
    # The step's protocol does not matter: the probe times its round trip in any mode.
    assert plan_from_round_trip({**params, "protocol": "prepared"}, 0.02) == plan
    # A slow round trip (a distant client): few enough transactions to log them all.
    slow = plan_from_round_trip(params, 2 * 1000 * PROBE_TPS_SHARE / LOG_LINES_PER_S)
    assert slow is not None and slow.sampling_rate is None
    assert slow.expected_tps == pytest.approx(LOG_LINES_PER_S / 2)


@pytest.mark.parametrize(
    "changed",
    [
        {"clients": 2},  # clients contend: one's round trip says little of their sum
        {"mode": "tpcb-like"},  # several statements a transaction, and commits
        {"mode": "custom", "scripts": ["q.sql"]},
        {"extra_args": ["--random-seed=1"]},  # may change the transaction or its pace
    ],
)
def test_other_steps_are_calibrated_whatever_the_probe_says(changed: dict[str, JSONValue]):
    params: dict[str, JSONValue] = {"mode": "select-only", "clients": 1, "duration_s": 10}
    assert probe_predicts(params)
    assert not probe_predicts({**params, **changed})
    assert plan_from_round_trip({**params, **changed}, 0.02) is None


@pytest.mark.parametrize("p50", [None, 0, 0.0, -1.0, True, "0.02"])
def test_a_failed_or_odd_probe_leaves_it_to_the_calibration(p50: JSONValue):
    params: dict[str, JSONValue] = {"mode": "select-only", "clients": 1, "duration_s": 10}
    assert plan_from_round_trip(params, p50) is None


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
