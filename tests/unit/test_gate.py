"""`compare --fail-if`: thresholds parsed, judged with compare's significance, exit statuses.
Runs are written with the Store API (tests/unit/stored_runs.py) with known values; the gate
on real runs is in tests/integration/test_travel_and_gate.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from howfast.analysis.compare import compare_runs
from howfast.analysis.gate import evaluate, gated_metrics, parse_threshold
from howfast.cli import main
from howfast.errors import UsageError
from howfast.model import RunRecord, StepRecord
from howfast.store import SqlStore
from tests.unit.stored_runs import init, open_temp_store, pgbench, store_run

SLOW = [1000.0, 1010.0, 990.0]
FAST = [1100.0, 1115.0, 1090.0]  # +10.2%, beyond doubt
WIDE_A = [1000.0, 1300.0, 700.0]
WIDE_B = [900.0, 1200.0, 600.0]  # -10%, but the spread hides it


@pytest.fixture
def db(tmp_path: Path):
    store = open_temp_store(tmp_path)
    yield store
    store.close()


def repeated(target: str, values: list[float], clients: int = 4) -> list[StepRecord]:
    return [pgbench(target, v, clients, repetition=i) for i, v in enumerate(values, start=1)]


def stored(db: SqlStore, steps: list[StepRecord], target: str) -> RunRecord:
    run = db.get_run(store_run(db, steps, targets=[target]), with_series=True)
    assert run is not None
    return run


@pytest.fixture
def slow_fast(db: SqlStore) -> tuple[RunRecord, RunRecord]:
    """Slow and fast at 4 clients; at 8 clients slow is 10% lower, hidden in noise; one load
    each, slower in fast."""
    slow = stored(db, [init("/a", 10.0), *repeated("/a", SLOW), *repeated("/a", WIDE_B, 8)], "/a")
    fast = stored(db, [init("/b", 12.0), *repeated("/b", FAST), *repeated("/b", WIDE_A, 8)], "/b")
    return slow, fast


# -- thresholds -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "op", "change"),
    [
        ("tps<-5%", "<", -0.05),
        (" tps < - 2.5 % ", "<", -0.025),
        ("latency_p99_ms>+10%", ">", 0.10),
        ("init_total_s>+0%", ">", 0.0),
    ],
)
def test_thresholds_that_parse(text: str, op: str, change: float) -> None:
    threshold = parse_threshold(text)
    assert (threshold.op, threshold.change) == (op, pytest.approx(change))
    assert threshold.metric == text.split("<")[0].split(">")[0].strip()


@pytest.mark.parametrize(
    ("text", "said", "accepted"),
    [
        ("tp<-5%", "unknown metric 'tp'", "tps, steady_tps"),
        ("latency_max_ms>+5%", "unknown metric 'latency_max_ms'", "latency_p99_ms"),
        ("tps", "not a threshold", "METRIC<-N% or METRIC>+N%"),
        ("tps<=-5%", "not a threshold", "METRIC<-N% or METRIC>+N%"),
        ("", "not a threshold", "METRIC<-N%"),
        ("tps<-5", "must be a percentage", "write tps<-5%"),
        ("tps<5%", "'<' needs a fall (-N%)", "write tps<-5%"),
        ("latency_p99_ms>-10%", "'>' needs a rise (+N%)", "write latency_p99_ms>+10%"),
        ("tps<-100%", "cannot fall by 100% or more", "below 100%"),
    ],
)
def test_bad_thresholds_say_what_is_wrong_and_what_is_accepted(
    text: str, said: str, accepted: str
) -> None:
    with pytest.raises(UsageError) as raised:
        parse_threshold(text)
    assert said in raised.value.message
    assert accepted in str(raised.value)
    assert repr(text) in raised.value.message


def test_the_accepted_metrics_are_those_compare_compares() -> None:
    names = gated_metrics()
    assert {"tps", "steady_tps", "latency_p99_ms", "init_total_s", "read_iops"} <= set(names)
    assert "latency_max_ms" not in names  # stored, but compare does not compare it
    assert len(names) == len(set(names))


def test_breached_is_strictly_past_the_threshold() -> None:
    fall, rise = parse_threshold("tps<-5%"), parse_threshold("latency_p99_ms>+10%")
    assert fall.breached(0.94) and not fall.breached(0.95) and not fall.breached(1.3)
    assert rise.breached(1.11) and not rise.breached(1.10) and not rise.breached(0.5)


# -- judging -----------------------------------------------------------------------------------


def test_a_significant_fall_past_the_threshold_fails(slow_fast) -> None:
    slow, fast = slow_fast
    gate = evaluate(compare_runs([fast, slow]), [parse_threshold("tps<-5%")])
    by_test = {c.test: c for c in gate.checks}
    assert set(by_test) == {"pgbench tpcb-like, 4 clients", "pgbench tpcb-like, 8 clients"}
    failed = by_test["pgbench tpcb-like, 4 clients"]
    assert failed.outcome == "fail" and failed.significant is True
    assert failed.ratio == pytest.approx(1000.0 / 1101.6667, rel=1e-6)
    assert failed.reason.startswith("-9.2%, past it: ")
    assert "significant (worse)" in failed.reason
    # -10% at 8 clients, but not significant: noise past a threshold is not a regression
    noisy = by_test["pgbench tpcb-like, 8 clients"]
    assert noisy.outcome == "pass" and noisy.significant is False
    assert "past it but not significant" in noisy.reason
    assert (gate.outcome, gate.exit_status) == ("fail", 1)


def test_a_significant_change_within_the_threshold_passes(slow_fast) -> None:
    slow, fast = slow_fast
    gate = evaluate(compare_runs([fast, slow]), [parse_threshold("tps<-10%")])
    four = next(c for c in gate.checks if c.test.endswith("4 clients"))
    assert four.significant is True and four.outcome == "pass"
    assert four.reason.startswith("-9.2%, within it: ")
    assert (gate.outcome, gate.exit_status) == ("pass", 0)


def test_an_improvement_passes_and_latency_rises_fail(slow_fast) -> None:
    slow, fast = slow_fast
    assert evaluate(compare_runs([slow, fast]), [parse_threshold("tps<-5%")]).exit_status == 0
    rise = evaluate(compare_runs([fast, slow]), [parse_threshold("latency_avg_ms>+5%")])
    assert [c.outcome for c in rise.checks] == ["fail", "pass"]


def test_one_repetition_cannot_be_judged_even_far_past_the_threshold(slow_fast) -> None:
    slow, fast = slow_fast
    gate = evaluate(compare_runs([slow, fast]), [parse_threshold("init_total_s>+10%")])
    (check,) = gate.checks
    assert check.ratio == pytest.approx(1.2)
    assert check.outcome == "cannot judge" and check.significant is None
    assert "1 repetition" in check.reason
    assert (gate.outcome, gate.exit_status) == ("cannot judge", 3)
    assert "--repeat 3" in gate.summary()


def test_a_failure_outweighs_what_cannot_be_judged(slow_fast) -> None:
    slow, fast = slow_fast
    thresholds = [parse_threshold("init_total_s>+10%"), parse_threshold("tps<-5%")]
    gate = evaluate(compare_runs([fast, slow]), thresholds)
    assert {c.outcome for c in gate.checks} == {"cannot judge", "fail", "pass"}
    assert gate.exit_status == 1


def test_a_figure_no_matched_test_has_cannot_be_judged(slow_fast) -> None:
    slow, fast = slow_fast
    gate = evaluate(compare_runs([slow, fast]), [parse_threshold("read_iops<-5%")])
    (check,) = gate.checks
    assert check.outcome == "cannot judge"
    assert check.reason == "no test that ran in both has read_iops"
    assert gate.exit_status == 3


def test_new_without_a_completed_value_cannot_be_judged(db: SqlStore) -> None:
    base = stored(db, repeated("/a", SLOW), "/a")
    broken = [
        StepRecord(**{**vars(step), "status": "failed", "metrics": {}})  # type: ignore[arg-type]
        for step in repeated("/b", FAST)
    ]
    new = stored(db, broken, "/b")
    gate = evaluate(compare_runs([base, new]), [parse_threshold("tps<-5%")])
    (check,) = gate.checks
    assert check.outcome == "cannot judge"
    assert check.reason == f"run {new.id} has no completed value of it"


# -- the command ---------------------------------------------------------------------------------


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_compare_fail_if_exit_statuses(slow_fast, tmp_path: Path, capsys) -> None:
    slow, fast = slow_fast
    store = ["--store", str(tmp_path / "results.db")]
    base_new = [str(fast.id), str(slow.id)]
    code, out, err = run_main(["compare", *base_new, "--fail-if", "tps<-5%", *store], capsys)
    assert code == 1
    assert "FAIL" in out and "gate: FAILED (1 of 2 checks significantly past its threshold)" in err
    thresholds = ["--fail-if", "tps<-5%", "--fail-if", "latency_p99_ms>+10%"]
    code, out, err = run_main(["compare", *base_new[::-1], *thresholds, *store], capsys)
    assert code == 0 and "gate: passed (4 checks, none significantly past its threshold)" in err
    code, out, err = run_main(
        ["compare", *base_new, "--fail-if", "init_total_s>+5%", *store], capsys
    )
    assert code == 3 and "CANNOT JUDGE" in out and "gate: cannot judge" in err


def test_compare_fail_if_json_carries_the_gate(slow_fast, tmp_path: Path, capsys) -> None:
    import json

    slow, fast = slow_fast
    args = ["compare", str(fast.id), str(slow.id), "--fail-if", "tps<-5%", "--json"]
    code, out, _ = run_main([*args, "--store", str(tmp_path / "results.db")], capsys)
    assert code == 1
    gate = json.loads(out)["gate"]
    assert gate["outcome"] == "fail" and gate["exit_status"] == 1
    assert [c["outcome"] for c in gate["checks"]] == ["fail", "pass"]
    assert gate["checks"][0]["threshold"] == "tps<-5%"
    assert gate["checks"][0]["significant"] is True


def test_a_bad_threshold_is_refused_before_the_store_is_read(tmp_path: Path, capsys) -> None:
    store = tmp_path / "never-made.db"
    code, out, err = run_main(
        ["compare", "1", "2", "--fail-if", "tps<5%", "--store", str(store)], capsys
    )
    assert code == 2 and out == ""
    assert "--fail-if 'tps<5%': '<' needs a fall (-N%)" in err
    assert not store.exists()
