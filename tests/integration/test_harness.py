"""The test harness itself: a test that runs out of time ends its howfast with SIGINT, so that
howfast takes down what it built (a SIGKILL, as subprocess.run's time-out sends, would leave
its server running and, on an emulated volume, the volume mounted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import Howfast, finish, postgres_pids_under, wait_for

pytestmark = pytest.mark.integration

PLAN = """
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
duration = "120s"
rate = 50  # it only holds the server while the test times out; not flat out
"""


def test_a_time_out_interrupts_howfast_which_then_takes_down_its_cluster(
    howfast: Howfast, target_dir: Path
):
    proc = howfast.popen("run", str(howfast.plan(PLAN)), "--target", str(target_dir))
    wait_for(proc, "[2/2]")
    assert postgres_pids_under(target_dir), "the server runs"
    with pytest.raises(AssertionError) as caught:
        finish(proc, None, timeout=1)
    assert "still ran after 1 s: interrupted (SIGINT), exit status 130" in str(caught.value)
    assert postgres_pids_under(target_dir) == [] and list(target_dir.iterdir()) == []
