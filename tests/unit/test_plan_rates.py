"""Rate keys of pgbench steps: validation and expansion into fixed-rate steps."""

from __future__ import annotations

import pytest

from howfast.errors import PlanError, UsageError
from howfast.plans import Overrides, expand, load_plan, parse_plan

BASE = """
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1, 4]
duration = "5s"
"""


def _plan(extra: str):
    return parse_plan(BASE + extra, source="rates.toml")


def test_fractions_start_each_curve_with_a_full_speed_step():
    specs = expand(_plan("rate_fractions = [0.5, 1.0]\nslo = 'p99=10ms'\n"))
    roles = [(s.params["clients"], s.params.get("curve_role"), s.params.get("rate_fraction"),
              s.params.get("curve_last")) for s in specs]  # fmt: skip
    assert roles == [
        (1, "max", None, None), (1, None, 0.5, None), (1, None, 1.0, True),
        (4, "max", None, None), (4, None, 0.5, None), (4, None, 1.0, True),
    ]  # fmt: skip
    assert all(s.params["slo"] == "p99=10ms" for s in specs)


def test_absolute_rates_and_overrides():
    specs = expand(_plan("rates = [100, 200]\n"), Overrides(clients=[2]))
    assert [s.params["rate"] for s in specs] == [100, 200]
    assert "curve_role" not in specs[0].params and specs[1].params["curve_last"] is True
    fixed = expand(_plan("rate_fractions = [0.5]\n"), Overrides(rate=2500, slo="p95=5ms"))
    assert [(s.params["rate"], s.params["slo"]) for s in fixed] == [(2500, "p95=5ms")] * 2
    replaced = expand(_plan("rate_fractions = [0.5]\n"), Overrides(rates=[10, 20, 30]))
    assert [s.params["rate"] for s in replaced] == [10, 20, 30] * 2


def test_curve_last_marks_only_the_very_last_repetition():
    specs = expand(_plan("rates = [100, 200]\n"), Overrides(clients=[1], repeat=2))
    assert [s.params.get("curve_last", False) for s in specs] == [False, False, False, True]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("rate = 10\nrates = [1, 2]\n", "not several"),
        ("rates = [0]\n", r"rates\[0\]: must be more than 0"),
        ("rate_fractions = []\n", "rate_fractions: must not be empty"),
        ("slo = 'p98=1ms'\n", "p99=10ms"),
    ],
)
def test_bad_rate_keys(extra: str, message: str):
    with pytest.raises(PlanError, match=message):
        _plan(extra)


def test_bad_overrides():
    with pytest.raises(UsageError, match="--rate or --rates"):
        Overrides(rate=1, rates=[2])
    with pytest.raises(UsageError, match="above 0"):
        Overrides(rates=[5, -1])
    with pytest.raises(UsageError, match="--slo"):
        Overrides(slo="fast")


def test_builtin_rate_curve_plan():
    specs = expand(load_plan("rate-curve"))
    assert specs[0].workload == "pgbench-init"
    assert specs[1].params["curve_role"] == "max"
    fractions = [s.params["rate_fraction"] for s in specs[2:]]
    assert fractions == [0.1, 0.25, 0.5, 0.7, 0.8, 0.9, 1.0, 1.1]
