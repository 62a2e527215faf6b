"""`warmup` on a pgbench step: one run before each mode's measurements, marked and left out of
every statistic."""

from __future__ import annotations

import pytest

from howfast.errors import PlanError
from howfast.plans import Overrides, expand, parse_plan

PLAN = """
repeat = 2
[[steps]]
workload = "pgbench-init"
scale = 5
[[steps]]
workload = "pgbench"
modes = ["select-only", "tpcb-like"]
clients = [1, 8]
duration = "30s"
warmup = "10s"
"""


def test_one_warmup_per_mode_at_its_largest_client_count() -> None:
    specs = expand(parse_plan(PLAN, source="p.toml"))
    shape = [
        (s.workload, s.params.get("mode"), s.params.get("clients"), s.repetition,
         s.params.get("warmup", False))
        for s in specs
    ]  # fmt: skip
    assert shape == [
        ("pgbench-init", None, None, 1, False),
        ("pgbench", "select-only", 8, 1, True),
        ("pgbench", "select-only", 1, 1, False),
        ("pgbench", "select-only", 1, 2, False),
        ("pgbench", "select-only", 8, 1, False),
        ("pgbench", "select-only", 8, 2, False),
        ("pgbench", "tpcb-like", 8, 1, True),
        ("pgbench", "tpcb-like", 1, 1, False),
        ("pgbench", "tpcb-like", 1, 2, False),
        ("pgbench", "tpcb-like", 8, 1, False),
        ("pgbench", "tpcb-like", 8, 2, False),
    ]
    warmup = specs[1].params
    assert warmup["duration_s"] == 10 and warmup["scale"] == 5 and warmup["jobs"] is None


def test_warmup_is_timed_even_when_the_measurements_count_transactions() -> None:
    plan = PLAN.replace('duration = "30s"', "transactions = 1000")
    warmup = expand(parse_plan(plan, source="p.toml"), Overrides(clients=[4]))[1].params
    assert warmup["duration_s"] == 10 and "transactions" not in warmup
    assert warmup["clients"] == 4


def test_no_warmup_by_default_and_whole_seconds_only() -> None:
    specs = expand(parse_plan(PLAN.replace('warmup = "10s"\n', ""), source="p.toml"))
    assert not any(s.params.get("warmup") for s in specs)
    with pytest.raises(PlanError, match="whole seconds"):
        parse_plan(PLAN.replace('"10s"', '"2.5s"'), source="p.toml")
