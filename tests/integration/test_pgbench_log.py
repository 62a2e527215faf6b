"""pgbench's per-transaction log sampled to the expected rate, and per-statement latencies
where they are cheap or asked for: real pgbench on a tiny local cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from howfast.analysis.percentiles import min_samples
from howfast.workloads.pgbench.logsampling import sampling_rate
from tests.integration.conftest import Howfast

pytestmark = pytest.mark.integration

PLAN = """
[settings]
shared_buffers = "32MB"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1, 2]
duration = "2s"
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [2]
duration = "2s"
rate = 4000
statement_latencies = true
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1]
duration = "2s"
statement_latencies = false
"""


def test_sampled_log_gives_percentiles_series_and_sample_counts(howfast: Howfast, target_dir: Path):
    plan = howfast.plan(PLAN)
    out = howfast("run", str(plan), "--target", str(target_dir), "--json")
    assert out.returncode == 0, out.stderr
    shown = howfast("results", "show", json.loads(out.stdout)["id"], "--json", "--series")
    steps = json.loads(shown.stdout)["steps"][1:]
    assert [s["status"] for s in steps] == ["completed"] * 4, [s["error"] for s in steps]
    first, second, rated, tpcb = steps

    # The first select-only step measured its rate in a calibration run, the next one took it
    # from the first (scaled by clients); the rated one from its offered rate.
    assert first["resolved"]["log_sampling_basis"] == "calibration"
    assert second["resolved"]["log_sampling_basis"] == "earlier step"
    assert rated["resolved"]["log_sampling_basis"] == "offered rate"
    assert rated["resolved"]["log_sampling_rate"] == sampling_rate(4000)
    for step in (first, second):
        expected = step["resolved"]["log_expected_tps"]
        assert step["resolved"]["log_sampling_rate"] == (sampling_rate(expected) or 1.0)

    for step in steps:
        m = step["metrics"]
        rate = step["resolved"]["log_sampling_rate"]
        # Percentiles, from the (sampled) log, with the count they came from.
        assert 0 < m["latency_p50_ms"] <= m["latency_p99_ms"] <= m["latency_max_ms"]
        assert m["latency_p99_ci_low_ms"] <= m["latency_p99_ms"]
        assert sum(step["histograms"]["latency_us"].values()) == m["latency_samples"]
        assert m["latency_samples"] <= m["transactions"]
        if rate == 1.0:
            assert m["latency_samples"] == m["transactions"]
        # A sample drawn at this rate: within generous bounds of its expected size.
        assert 0.6 * rate * m["transactions"] <= m["latency_samples"]
        assert m["latency_samples"] <= 1.4 * rate * m["transactions"] + 20
        # The log's per-second counts are scaled back up to the run's.
        log_total = sum(v for _, v in step["series"]["log_tps"])
        assert 0.6 * m["transactions"] <= log_total <= 1.4 * m["transactions"] + 20 / rate
        assert step["series"]["log_latency_ms"]
        # Too few samples for p99.9: flagged when the run is read, and only then.
        short = m["latency_samples"] < min_samples(99.9)
        assert ("latency_p999_ms" in m.get("latency_too_few_samples", [])) is short
        assert any("p99.9 latency from" in w for w in step["warnings"]) is short

    # -r: off for select-only unless asked, off for tpcb-like when the plan says so.
    assert "statements" not in first["metrics"]
    assert first["resolved"]["statement_latencies"] is False
    assert rated["metrics"]["statements"] and rated["resolved"]["statement_latencies"] is True
    assert "statements" not in tpcb["metrics"]
