"""Trials read back end to end (docs/events.md#trials-the-statistics): a failover step repeated
on a real local target with one synchronous standby (the postgres OS user) is shown as trials
by `results show`, its JSON and the report, judged by the `--slo` stored with `run` and by one
given when it is read. `--repeat` stores repetitions exactly as `run --trials` does (one step
per trial, `repetition` from 2 on), so this reads what both write."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.integration.conftest import Howfast

pytestmark = pytest.mark.integration

# The plans here log every transaction (`latency_log = "full"`), as a sampled log of these
# few hundred commits a second would anyway: without it each step of a new test first runs
# an unmeasured calibration of a second to learn that (workloads/pgbench/logsampling.py).
EVENT_STEP = """
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [2]
duration = "8s"
latency_log = "full"
"""


@pytest.fixture(autouse=True)
def _root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the servers run as their own OS user")


def test_repeated_failovers_read_as_trials_with_the_stored_slo_and_a_given_one(
    howfast: Howfast, target_dir: Path, tmp_path: Path
) -> None:
    plan = howfast.plan(EVENT_STEP)
    out = howfast("run", str(plan), "--target", str(target_dir), "--replicas", "1",
                  "--sync", "on", "--repeat", "2", "--event", "4s:failover",
                  "--slo", "rto=60s,rpo=0", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert doc["environment"]["slo"] == "rto=60s,rpo=0"  # a run-level setting
    steps = [s for s in doc["steps"] if s["workload"] == "pgbench"]
    assert all("slo" not in s["params"] for s in steps)  # not a step param
    (trials,) = doc["trials"]
    assert trials["trials"] == 2 and trials["trials_counted"] == 2
    # synchronous: no acknowledged commit may be lost (tests/integration/test_failover.py)
    assert trials["trials_with_loss"] == 0 and trials["p_loss"] == 0.0
    low, high = trials["p_loss_ci95"]
    assert low == 0.0 and 0.6 < high < 0.7  # Wilson's 95% upper bound of 0 of 2: 0.658
    assert [t["trial"] for t in trials["per_trial"]] == [1, 2]
    assert [t["step"] for t in trials["per_trial"]] == [s["id"] for s in steps]
    for trial, step in zip(trials["per_trial"], steps, strict=True):
        (event,) = step["events"]
        assert trial["downtime_s"] == event["downtime_s"] > 0
        assert trial["lost_commits"] == event["lost_commits"] == 0
    assert trials["downtime_max_s"] == max(t["downtime_s"] for t in trials["per_trial"])
    # Each failover took well under a minute here and lost no commit proven: no trial missed
    # the stored objectives. A client cut during its COMMIT whose row is not found may have
    # lost an acknowledged commit or not (lost at most 1): rpo=0 then cannot be told.
    assert trials["slo"]["source"] == "stored with the run"
    untold = [t["trial"] for t in trials["per_trial"] if t["lost_commits_max"] > 0]
    outcomes = [t["outcome"] for t in trials["slo"]["trials"]]
    assert outcomes == ["cannot tell" if n in untold else "met" for n in (1, 2)]
    assert trials["slo"]["outcome"] == ("cannot tell" if untold else "pass")

    run_id = doc["id"]
    report = tmp_path / "trials.md"
    shown, tight, bad, made = howfast.together(  # reads of the stored run, all at once
        ["results", "show", run_id],
        ["results", "show", run_id, "--slo", "rto=1ms", "--json"],
        ["results", "show", run_id, "--slo", "rto=1ms,mttr=5s"],
        ["report", run_id, "-o", str(report), "--slo", "rto=60s"],  # not the stored SLO
    )
    assert shown.returncode == 0, shown.stderr
    assert "commits lost in 0 of 2 trials (P = 0.00, 95% CI 0.00–0.66)" in shown.stdout
    said = "cannot tell: trial" if untold else "passed: all 2 trials met it"
    assert f"SLO rto=60s,rpo=0: {said}" in shown.stdout

    # an outage of more than a millisecond misses rto=1ms: each trial is named
    assert tight.returncode == 0, tight.stderr
    verdict = json.loads(tight.stdout)["trials"][0]["slo"]
    assert verdict["source"] == "given" and verdict["outcome"] == "fail"
    assert [t["outcome"] for t in verdict["trials"]] == ["missed", "missed"]
    assert verdict["line"].startswith("SLO rto=1ms: failed: 2 of 2 trials missed it: trial 1 (")

    assert bad.returncode == 2 and 'unknown key "mttr"' in bad.stderr

    assert made.returncode == 0, made.stderr
    text = report.read_text()
    assert "## Trials" in text and "SLO rto=60s: passed: all 2 trials met it" in text
    assert "lost commits per trial](" in text  # its chart, as a PNG beside the report
