"""pgbench's per-transaction log sampled to the expected rate, and per-statement latencies
where they are cheap or asked for: real pgbench on a tiny local cluster."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from howfast.analysis.percentiles import min_samples
from howfast.workloads.pgbench import livelog
from howfast.workloads.pgbench.livelog import POLL_S, LogFollower
from howfast.workloads.pgbench.logsampling import (
    PROBE_TPS_SHARE,
    PROGRESS_MAX_TPS,
    sampling_rate,
)
from tests.conftest import PgServer
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
duration = "3s"
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

    # The first select-only step, of one client, took its rate from its own round-trip probe
    # (no calibration run), the next one from the first (scaled by clients); the rated one
    # from its offered rate; the first tpcb-like step, another test, from a calibration run.
    assert first["resolved"]["log_sampling_basis"] == "round-trip probe"
    probed = PROBE_TPS_SHARE * 1000 / first["metrics"]["client_rtt_p50_ms"]
    # (log_expected_tps is stored rounded to 0.1)
    assert first["resolved"]["log_expected_tps"] == pytest.approx(probed, abs=0.06)
    assert second["resolved"]["log_sampling_basis"] == "earlier step"
    assert second["resolved"]["log_expected_tps"] == pytest.approx(
        2 * first["metrics"]["tps"], abs=0.06
    )
    assert rated["resolved"]["log_sampling_basis"] == "offered rate"
    assert tpcb["resolved"]["log_sampling_basis"] == "calibration"
    assert rated["resolved"]["log_sampling_rate"] == sampling_rate(4000)
    for step in (first, second):
        # the rate came from the unrounded figure, stored rounded to 0.1: either side of it
        # (seen: 7142.9 stored, 0.14 taken, sampling_rate(7142.9) = 0.139)
        expected = step["resolved"]["log_expected_tps"]
        possible = {sampling_rate(expected + d) or 1.0 for d in (-0.05, 0.0, 0.05)}
        assert step["resolved"]["log_sampling_rate"] in possible, (expected, possible)

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
        # Above PROGRESS_MAX_TPS pgbench prints no progress: the step's per-second series are
        # the log's (whole seconds only), its counts scaled back up to the run's rate.
        expected = step["resolved"].get("log_expected_tps") or 0
        from_log = expected > PROGRESS_MAX_TPS
        assert step["resolved"]["progress_source"] == (
            "per-transaction log" if from_log else "pgbench -P 1"
        )
        if from_log:
            # 3 s steps, so that a whole second is logged even when pgbench started late on
            # a loaded machine (its -T clock runs from before its connections)
            assert "log_tps" not in step["series"]
            assert step["series"]["tps"] and step["series"]["latency_ms"]
            # Scaled up once: left unscaled, every second would read at most `rate` (<= 0.2
            # above PROGRESS_MAX_TPS) of its true rate, so some second under 0.3x the mean;
            # scaled twice, the seconds would add up to more than the step's transactions.
            # (A whole second on a loaded machine ran at 0.49x the mean in CI-like runs.)
            assert rate <= 0.2
            for _, tps in step["series"]["tps"]:
                assert 0.3 * m["tps"] <= tps <= 2.0 * m["tps"], (tps, m["tps"])
            assert sum(v for _, v in step["series"]["tps"]) <= 1.2 * m["transactions"]
        else:
            log_total = sum(v for _, v in step["series"]["log_tps"])
            assert 0.6 * m["transactions"] <= log_total <= 1.4 * m["transactions"] + 20 / rate
            assert step["series"]["log_latency_ms"] and step["series"]["tps"]
        # Too few samples for p99.9: flagged when the run is read, and only then.
        short = m["latency_samples"] < min_samples(99.9)
        assert ("latency_p999_ms" in m.get("latency_too_few_samples", [])) is short
        assert any("p99.9 latency from" in w for w in step["warnings"]) is short

    # the offered 4,000 TPS is under PROGRESS_MAX_TPS: pgbench's own progress lines
    assert rated["resolved"]["progress_source"] == "pgbench -P 1"
    # -r: off for select-only unless asked, off for tpcb-like when the plan says so.
    assert "statements" not in first["metrics"]
    assert first["resolved"]["statement_latencies"] is False
    assert rated["metrics"]["statements"] and rated["resolved"]["statement_latencies"] is True
    assert "statements" not in tpcb["metrics"]


def test_the_live_view_follows_a_real_pgbench_log(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Without progress lines, LogFollower reads pgbench's log files as they grow and reports
    each whole second: TPS scaled up by the sampling rate, and the mean latency.

    A second is reported once every file has moved past it, or by the clock DELAY_S after
    it, when lines may still sit in a starved thread's 4 KiB buffer (CI: 7 of 239 lines
    late). The clock's rule has its unit test; here it is put out of reach, so that every
    second is reported by the files alone and must equal what they hold in the end."""
    monkeypatch.setattr(livelog, "DELAY_S", 60)
    pgbench = str(pg_server.bindir / "pgbench")
    conn = ["-h", "127.0.0.1", "-p", str(pg_server.port), "-U", pg_server.user, "postgres"]
    env = {**os.environ, "PGPASSWORD": pg_server.password}
    subprocess.run([pgbench, "-i", "-q", "-s", "1", *conn], env=env, check=True,
                   capture_output=True)  # fmt: skip
    rate = 0.2  # each thread's buffer fills (and its file moves on) within a second
    seen: list[tuple[float, dict[str, float]]] = []
    argv = [pgbench, "-b", "select-only", "-c", "2", "-j", "2", "-T", "5", "-l",
            f"--log-prefix={tmp_path / 'tx'}", f"--sampling-rate={rate}", *conn]  # fmt: skip
    with LogFollower(tmp_path, "tx.*", rate, lambda t, v: seen.append((t, v)), files=2):
        out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
        # while pgbench ran, seconds were reported as they completed, not only at the end
        during = len(seen)
        time.sleep(POLL_S * 2.5)  # the seconds the files moved past as pgbench ended
    tps = float(re.search(r"tps = ([\d.]+) \(without", out.stdout).group(1))  # type: ignore[union-attr]
    assert during >= 2, seen
    times = [t for t, _ in seen]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert 3 <= len(seen) <= 5  # whole seconds of a 5 s run: not the first, partial one
    # Each second reported live is what the finished files hold for it (read whole here,
    # afterwards): the follower missed no line and counted none twice while the files grew.
    # (Against pgbench's mean TPS a second can be off by 2x on a loaded machine.)
    by_second: dict[int, int] = {}
    for path in tmp_path.glob("tx.*"):
        for line in path.read_text().splitlines():
            second = int(line.split()[4])
            by_second[second] = by_second.get(second, 0) + 1
    first = min(by_second)
    for t, values in seen:  # not pgbench's final, partial second: only the clock reports it
        expected = by_second.get(first + int(t), 0) / rate
        assert values["tps"] == pytest.approx(expected), (t, values, by_second)
        assert values["tps"] > 0 and 0 < values["latency_ms"] < 100, (values, tps)
