"""Repetitions end to end: a real `howfast run --repeat 2` with a warm-up, then `results
show`, `compare` and `report` on what it stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import Howfast

pytestmark = pytest.mark.integration

PLAN = """
description = "one mode, one client count, a warm-up"
[settings]
shared_buffers = "32MB"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [2]
duration = "2s"
warmup = "1s"
# 500/s: what is checked is the flow of repetitions and a run compared with itself, not
# throughput; flat out, the warm-up and both repetitions kept both cores busy
rate = 500
"""


def test_repetitions_flow_to_show_compare_and_report(howfast: Howfast, target_dir: Path):
    plan = howfast.plan(PLAN)
    out = howfast("run", str(plan), "--target", str(target_dir), "--repeat", "2", "--json")
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout)
    pgbench = [s for s in run["steps"] if s["workload"] == "pgbench"]
    assert [s["params"].get("warmup", False) for s in pgbench] == [True, False, False]
    assert [s["params"].get("repetition", 1) for s in pgbench[1:]] == [1, 2]
    assert pgbench[0]["params"]["duration_s"] == 1

    page = howfast.workdir / "run.html"
    shown, compared, made = howfast.together(  # reads of the stored run, all at once
        ["results", "show", run["id"]],
        ["compare", run["id"], run["id"], "--json"],
        ["report", run["id"], "-o", str(page)],
    )
    assert shown.returncode == 0, shown.stderr
    assert "mean ± 95% CI over the repetitions" in shown.stdout
    assert "warm-up (left out of every figure)" in shown.stdout

    assert compared.returncode == 0, compared.stderr
    document = json.loads(compared.stdout)
    test = next(t for t in document["tests"] if t["workload"] == "pgbench")
    assert test["repetitions"] == [2, 2]  # the warm-up is not a repetition
    tps = next(m for m in test["metrics"] if m["metric"] == "tps")
    mean = tps["values"][0]["mean"]
    assert mean == pytest.approx(sum(s["metrics"]["tps"] for s in pgbench[1:]) / 2)
    assert tps["differences"][1]["ratio"] == pytest.approx(1.0)
    assert tps["differences"][1]["significant"] is False
    assert any("fewer than 3 repetitions" in w for w in document["warnings"])

    assert made.returncode == 0, made.stderr
    text = page.read_text()
    assert f"{mean:,.1f} ± " in text
    assert "Warm-up runs, left out of every figure" in text
    markdown = howfast.workdir / "run.md"  # after the HTML one: both write run-charts/
    assert howfast("report", run["id"], "-o", str(markdown)).returncode == 0
    assert f"{mean:,.1f} ± " in markdown.read_text()
    assert list((howfast.workdir / "run-charts").glob("chart-*.png"))
