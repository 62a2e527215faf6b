"""Latency under load on a real local target: fixed rates below and far above capacity."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.integration.conftest import Howfast

pytestmark = pytest.mark.integration

CURVE_PLAN = """
[settings]
shared_buffers = "32MB"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1]
duration = "3s"
rate_fractions = [0.1, 8.0]
slo = "p99=1000ms"
"""


def test_rate_curve_below_and_above_capacity(howfast: Howfast, target_dir: Path):
    plan = howfast.plan(CURVE_PLAN)
    out = howfast("run", str(plan), "--target", str(target_dir), "--json")
    assert out.returncode == 0, out.stderr
    steps = json.loads(out.stdout)["steps"]
    full, low, high = steps[1:]
    assert full["params"]["curve_role"] == "max"
    max_tps = full["metrics"]["tps"]
    # The fractions became offered rates of the measured maximum.
    assert low["params"]["rate"] == pytest.approx(0.1 * max_tps, rel=0.01)
    # 8x, not 4x: the maximum is measured once, 3 s, and a loaded machine's capacity moves
    # by more than 2.4x between steps (with two busy loops beside the suite: 248 TPS in the
    # maximum's step, then 825 achieved of 994 offered at 4x).
    assert high["params"]["rate"] == pytest.approx(8.0 * max_tps, rel=0.01)

    m = low["metrics"]
    assert m["rate_met"] is True, m["rate_verdict"]
    # pgbench schedules a fixed rate as a Poisson process: over 3 s its count scatters by
    # sqrt(N) around the N = rate x 3 s expected, and a loaded machine lowers the measured
    # maximum and so N (at 150 TPS, N = 45: 20% is 1.3 sigma, a miss one run in five). The
    # tolerance is 3 sigma of that scatter, as the product's own verdict allows
    # (analysis/latency_curve.py achieved_floor), and never under 20%.
    expected = low["params"]["rate"] * 3
    tolerance = max(0.2, 3 / math.sqrt(expected))
    assert m["tps"] == pytest.approx(low["params"]["rate"], rel=tolerance), (m["tps"], expected)
    # Below capacity transactions start on schedule; a loaded shared machine can still stall
    # pgbench's thread for tens of ms, so the bound is loose and the sharp test is the ratio
    # to the overloaded step below, whose lag piles up for the whole step (~1 s on average).
    assert m["schedule_lag_avg_ms"] < 200
    assert m["slo_met"] is True and m["slo_limit_ms"] == 1000.0

    m = high["metrics"]
    assert m["rate_met"] is False
    assert m["tps"] < 0.6 * high["params"]["rate"]
    assert m["schedule_lag_avg_ms"] > 5 * low["metrics"]["schedule_lag_avg_ms"]
    assert m["slo_met"] is False  # a rate not achieved meets no objective
    assert any("not met" in w for w in high["warnings"])
    # The curve's summary sits on its last step.
    assert m["saturation_rate"] == low["params"]["rate"]
    assert m["slo_max_rate"] == low["params"]["rate"]
    assert "knee_how" in m


def test_rates_and_rate_options_override_the_plan(howfast: Howfast, target_dir: Path):
    plan = howfast.plan(CURVE_PLAN.replace('duration = "3s"', 'duration = "2s"'))
    out = howfast("run", str(plan), "--target", str(target_dir), "--rates", "20,40",
                  "--slo", "p95=2s", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    steps = json.loads(out.stdout)["steps"][1:]
    assert [s["params"]["rate"] for s in steps] == [20, 40]  # no full-speed step
    assert all(s["metrics"]["rate_met"] and s["metrics"]["slo_met"] for s in steps)
    assert steps[-1]["metrics"]["slo"] == "p95=2s"
    bad = howfast("run", str(plan), "--target", str(target_dir), "--rate", "10",
                  "--rates", "5")  # fmt: skip
    assert bad.returncode == 2 and "--rate or --rates" in bad.stderr
    bad_slo = howfast("run", str(plan), "--target", str(target_dir), "--slo", "p42=1ms")
    assert bad_slo.returncode == 2 and "--slo" in bad_slo.stderr
