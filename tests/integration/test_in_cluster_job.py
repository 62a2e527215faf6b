"""The half of `run --in-cluster` that runs in the Job's pod, here on this machine: `howfast
in-cluster-job -- ARGS` runs `howfast run ARGS` into its scratch store (HOWFAST_STORE, as the
Job sets it) and prints the run file at the end of its output, which is what the pod's log
carries back; decoded and imported elsewhere it is the same run. A directory target stands in
for the cluster (the lab test, tests/k8s/test_in_cluster.py, runs the whole for real)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from howfast.targets.k8s import incluster_result
from tests.conftest import shared_tmpdir
from tests.integration.conftest import Howfast

pytestmark = pytest.mark.integration

PLAN = """
description = "tiny"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
duration = "1s"
rate = 500  # the run file's round trip, not throughput
"""


def test_the_job_command_prints_a_run_file_that_imports_as_the_same_run(
    howfast: Howfast, tmp_path: Path
) -> None:
    plan = tmp_path / "tiny.toml"
    plan.write_text(PLAN)
    target = shared_tmpdir("howfast-icjob-")
    try:
        done = howfast("in-cluster-job", "--", str(plan), "--target", str(target), "--label", "ic")
    finally:
        shutil.rmtree(target, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1].startswith(incluster_result.END_PREFIX)  # the last thing it prints
    run_file = incluster_result.decode(lines)
    assert run_file is not None
    # the run as the scratch store has it, and as another store has it after the import
    here = json.loads(howfast("results", "show", "1", "--json").stdout)
    carried = tmp_path / "carried.json"
    carried.write_text(run_file)
    other = tmp_path / "other.db"
    imported = howfast("import", "run", str(carried), "--store", str(other), "--json")
    assert imported.returncode == 0, imported.stderr
    (there,) = json.loads(imported.stdout)
    assert there["label"] == "ic"
    assert [s["metrics"] for s in there["steps"]] == [s["metrics"] for s in here["steps"]]
    assert there["steps"][-1]["metrics"]["tps"] > 0
