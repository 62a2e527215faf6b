"""`--until ci=N%` and `--budget`: the rule's parser, the pure stopping rule, the order of the
targets in each round, the plan's blocks, and what a stored run's repetitions reached."""

from __future__ import annotations

import pytest

from howfast.analysis.stats import describe
from howfast.analysis.until import (
    FigureWidth,
    RoundState,
    budget_share,
    judged_metrics,
    round_order,
    stop_reason,
    summary_lines,
    until_summary,
)
from howfast.errors import UsageError
from howfast.model import RunRecord, StepRecord
from howfast.plans import Overrides, parse_plan
from howfast.plans.expand import expand_blocks
from howfast.plans.load import PlanError
from howfast.plans.until import UntilRule, make_rule, parse_width
from howfast.until_rule import BUDGET, FAILED, INTERRUPTED, MAXIMUM, REACHED, UNJUDGED

# -- the rule's text ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "width", "maximum"),
    [("ci=2%", 0.02, None), ("CI=0.5%", 0.005, None), ("ci=5%,max=12", 0.05, 12)],
)
def test_widths_parse(text: str, width: float, maximum: int | None) -> None:
    assert parse_width(text) == (pytest.approx(width), maximum)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("ci=2", "needs a %, e.g. ci=2%"),
        ("ci=0%", "above 0%"),
        ("ci=-2%", "above 0%"),
        ("ci=100%", "below 100%"),
        ("ci=2%,max=2", "max must be 3 or more"),
        ("max=10", "gives no width"),
        ("width=2%", "is not a stopping rule"),
        ("", "is not a stopping rule"),
    ],
)
def test_bad_widths_say_why(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_width(text)


def test_make_rule_from_options() -> None:
    rule = make_rule("ci=2%", "10m")
    assert rule == UntilRule(0.02, 600.0, 3, 30, text="ci=2%")
    assert make_rule(None, None) is None
    # --repeat with --until: the minimum number of repetitions
    assert make_rule("ci=2%", None, repeat=5) == UntilRule(0.02, None, 5, 30, text="ci=2%")
    assert make_rule("ci=2%", None, repeat=1).minimum == 3
    assert make_rule("ci=2%", None, repeat=40).maximum == 40


@pytest.mark.parametrize(
    ("until", "budget", "repeat", "message"),
    [
        ("ci=2", None, None, '--until: "ci=2": the width needs a %'),
        ("ci=2%", "10mn", None, '--budget: "10mn" is not a duration'),
        ("ci=2%", "0s", None, "--budget: a duration must be more than zero"),
        ("ci=2%", "-5m", None, "--budget"),
        (None, "10m", None, "--budget needs --until"),
        ("ci=2%,max=4", None, 6, "max=4 is below the minimum of 6"),
    ],
)
def test_bad_options_are_usage_errors(
    until: str | None, budget: str | None, repeat: int | None, message: str
) -> None:
    with pytest.raises(UsageError) as info:
        make_rule(until, budget, repeat=repeat)
    assert message in str(info.value)


PLAN = """
description = "until"
{keys}
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1, 2]
duration = "1s"
warmup = "1s"
[[steps]]
workload = "fio"
profiles = ["rand-read-4k-qd64"]
size = "16MiB"
runtime = "2s"
"""


def test_plan_keys() -> None:
    plan = parse_plan(PLAN.format(keys='until = "ci=2%"\nbudget = "10m"'), source="p.toml")
    assert plan.until == "ci=2%" and plan.budget == 600.0


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ('until = "ci=2"', 'p.toml:3: until: "ci=2": the width needs a %'),
        ('until = "ci=0%"', "p.toml:3: until:"),
        ('budget = "10 minutes"', "p.toml:3: budget:"),
    ],
)
def test_bad_plan_keys(keys: str, message: str) -> None:
    with pytest.raises(PlanError) as info:
        parse_plan(PLAN.format(keys=keys), source="p.toml")
    assert message in str(info.value)


def test_blocks_repeat_the_measuring_steps_only() -> None:
    plan = parse_plan(PLAN.format(keys=""), source="p.toml")
    blocks = expand_blocks(plan, Overrides(repeat=4))
    assert [(b.spec.workload, b.spec.params.get("warmup", False), b.repeated) for b in blocks] == [
        ("pgbench-init", False, False),
        ("pgbench", True, False),  # the warm-up runs once
        ("pgbench", False, True),
        ("pgbench", False, True),
        ("fio", False, True),
    ]
    assert all(b.spec.repetition == 1 for b in blocks)
    assert [b.spec.params.get("clients") for b in blocks[2:4]] == [1, 2]


def test_rate_curves_are_refused() -> None:
    plan = parse_plan(
        """
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [2]
duration = "1s"
rate_fractions = [0.5, 0.9]
""",
        source="c.toml",
    )
    with pytest.raises(UsageError, match="--until cannot repeat a rate curve"):
        expand_blocks(plan)


# -- the order of the targets ------------------------------------------------------------------


def test_rounds_alternate_the_targets() -> None:
    order = [round_order(2, r) for r in range(1, 5)]
    assert order == [[0, 1], [1, 0], [0, 1], [1, 0]]  # A B B A A B B A
    assert round_order(3, 1) == [0, 1, 2] and round_order(3, 2) == [2, 1, 0]
    assert round_order(1, 2) == [0]
    # every target goes first as often as last over two rounds
    flat = [t for r in (1, 2) for t in round_order(3, r)]
    assert sum(i for i, t in enumerate(flat) if t == 0) == sum(
        i for i, t in enumerate(flat) if t == 2
    )


# -- the stopping rule -------------------------------------------------------------------------


def width(values: list[float], ci: float = 0.02, minimum: int = 3) -> FigureWidth:
    return FigureWidth("a", "tps", describe(values), ci, minimum)


NARROW = [1000.0, 1001.0, 999.0, 1000.5]  # ±0.1%
WIDE = [1000.0, 1300.0, 800.0, 1100.0]  # ±30%


def test_a_figure_is_judged_by_its_interval_over_its_mean() -> None:
    assert width(NARROW).reached
    assert width(NARROW).relative == pytest.approx(0.0014, abs=0.0005)
    assert not width(WIDE).reached
    assert width(WIDE, ci=0.5).reached
    assert not width(NARROW[:2]).reached  # below the minimum: never judged reached
    assert width([5.0]).relative is None


def state(rounds: int, *, failed: bool = False, spent: float = 10.0, share: float | None = None):
    return RoundState(rounds, failed, spent, share)


def test_stop_reasons() -> None:
    narrow, wide = [width(NARROW)], [width(WIDE)]
    assert stop_reason(state(2), narrow, 3, 30) is None  # the minimum first
    assert stop_reason(state(4), narrow, 3, 30) == REACHED
    assert stop_reason(state(4), wide, 3, 30) is None
    assert stop_reason(state(30), wide, 3, 30) == MAXIMUM
    assert stop_reason(state(4, failed=True), narrow, 3, 30) == FAILED
    assert stop_reason(state(3), [], 3, 30) == UNJUDGED
    assert stop_reason(state(2), [], 3, 30) is None
    # every figure must reach the width, on every target
    assert stop_reason(state(4), [*narrow, *wide], 3, 30) is None


def test_the_budget_stops_a_round_that_would_end_past_the_share() -> None:
    wide = [width(WIDE)]
    # 4 rounds in 40 s: a fifth would end at 50 s
    assert stop_reason(state(4, spent=40, share=49), wide, 3, 30) == BUDGET
    assert stop_reason(state(4, spent=40, share=51), wide, 3, 30) is None
    # the budget wins over the minimum, but the first round always runs
    assert stop_reason(state(1, spent=10, share=5), wide, 3, 30) == BUDGET
    assert stop_reason(state(0, spent=0, share=0), wide, 3, 30) is None


def test_budget_shares_pass_unused_time_on() -> None:
    assert budget_share(600, 3) == 200
    assert budget_share(500, 2) == 250  # the first test used 100 s of its 200
    assert budget_share(-5, 2) == 0


def test_judged_figures() -> None:
    fio = [step("a", "fio", {"read_iops": 0.0, "write_iops": 2000.0})]
    assert judged_metrics("pgbench", {"mode": "select-only"}, []) == ("tps",)
    assert judged_metrics("pgbench", {"rate": 500}, []) == ("latency_avg_ms",)
    assert judged_metrics("fio", {}, fio) == ("write_iops",)
    assert judged_metrics("pg_test_fsync", {}, []) == ("fdatasync_ops_s",)
    assert judged_metrics("seqread", {}, []) == ()


# -- what a stored run reached -----------------------------------------------------------------

RULE = {"ci": 0.05, "min": 3, "max": 6, "budget_s": None}


def step(
    target: str,
    workload: str,
    metrics: dict[str, float],
    *,
    repetition: int = 1,
    params: dict[str, object] | None = None,
    status: str = "completed",
) -> StepRecord:
    p: dict[str, object] = dict(params or {"mode": "select-only", "clients": 2, "until": RULE})
    if repetition > 1:
        p["repetition"] = repetition
    return StepRecord(target, workload, p, status, "t0", "t1", metrics=dict(metrics))  # type: ignore[arg-type]


def run_of(steps: list[StepRecord], status: str = "completed") -> RunRecord:
    return RunRecord(1, "p", status, "t0", "t1", {}, [], steps)


def test_summary_of_a_run_that_reached_the_width() -> None:
    steps = []
    for r, (a, b) in enumerate([(1000, 2000), (1010, 2010), (990, 1990)], start=1):
        steps += [step("A", "pgbench", {"tps": a}, repetition=r)]
        steps += [step("B", "pgbench", {"tps": b}, repetition=r)]
    summary = until_summary(run_of(steps))
    assert summary is not None
    (test,) = summary.tests
    assert test.stopped == REACHED and test.reached and test.rounds == 3
    assert [(f.target, f.metric, f.n) for f in test.figures] == [("A", "tps", 3), ("B", "tps", 3)]
    doc = summary.document()
    assert doc["reached"] is True and doc["ci"] == 0.05
    assert doc["tests"][0]["figures"][0]["mean"] == pytest.approx(1000)
    assert "until" not in doc["tests"][0]["params"]
    assert "1 of 1 judged test(s) reached ±5%" in summary_lines(summary)[0]


def test_summary_says_why_a_test_stopped_short() -> None:
    wide = [(1000, 2000), (1500, 2500), (700, 1300)]
    steps = [
        step(t, "pgbench", {"tps": v}, repetition=r)
        for r, pair in enumerate(wide, start=1)
        for t, v in zip("AB", pair, strict=True)
    ]
    summary = until_summary(run_of(steps))
    assert summary is not None and summary.tests[0].stopped == BUDGET
    assert not summary.document()["reached"]
    assert "NOT reached" in "\n".join(summary_lines(summary))
    interrupted = until_summary(run_of(steps, status="aborted"))
    assert interrupted is not None and interrupted.tests[0].stopped == INTERRUPTED
    failed = until_summary(run_of([*steps, step("A", "pgbench", {}, status="failed")]))
    assert failed is not None and failed.tests[0].stopped == FAILED
    more = [
        step(t, "pgbench", {"tps": v}, repetition=r)
        for r, pair in enumerate(wide * 2, start=1)
        for t, v in zip("AB", pair, strict=True)
    ]
    maximum = until_summary(run_of(more))
    assert maximum is not None and maximum.tests[0].stopped == MAXIMUM


def test_a_run_without_until_has_no_summary() -> None:
    plain = step("A", "pgbench", {"tps": 1.0}, params={"mode": "select-only"})
    assert until_summary(run_of([plain])) is None
