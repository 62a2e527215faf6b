"""--node on the lab cluster: the pod lands on the node asked for (through the scheduler), and a
node that does not exist fails with the scheduler's own message, not a bare time-out."""

from __future__ import annotations

import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.k8s.conftest import Kube, assert_clean, lab_images, run_howfast, write_plan
from tests.k8s.lab.cluster import ClusterFacts
from tests.k8s.lab.config import SC_DISK

pytestmark = pytest.mark.k8s

INIT_ONLY = '[settings]\nshared_buffers = "16MB"\n[[steps]]\nworkload = "pgbench-init"\nscale = 1\n'


def test_node_pins_the_pod_and_an_unknown_node_says_why(
    k8s_lab: ClusterFacts, kube: Kube, howfast_env: dict[str, str], tmp_path: Path
) -> None:
    """Both runs at once: they are independent (each run its own objects), and the unknown
    node's waits out its start time-out, which one after the other added to the lab
    session, the suite's critical path."""
    plan = write_plan(tmp_path, INIT_ONLY)
    common = [*lab_images(k8s_lab), "--client", "same-pod", "--json"]  # one pod: the pin

    def pinned() -> subprocess.CompletedProcess[str]:
        return run_howfast(howfast_env, "run", plan, "--target", f"k8s://{SC_DISK}",
                           "--node", k8s_lab.node, *common)  # fmt: skip

    def unknown() -> tuple[subprocess.CompletedProcess[str], float]:
        env = {**howfast_env, "HOWFAST_K8S_START_TIMEOUT": "15"}
        started = time.monotonic()
        out = run_howfast(env, "run", plan, "--target", f"k8s://{SC_DISK}",
                          "--node", "no-such-node", *common, check=False)  # fmt: skip
        return out, time.monotonic() - started

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.submit(pinned), pool.submit(unknown)
        out = first.result()
        failed, took_s = second.result()
    doc = json.loads(out.stdout)
    assert doc["status"] == "completed", out.stderr
    kubernetes = doc["targets"][0]["device"]["kubernetes"]
    assert kubernetes["node"]["name"] == k8s_lab.node

    assert took_s < 90
    doc = json.loads(failed.stdout)
    assert doc["status"] == "failed"
    error = doc["steps"][0]["error"]
    # the scheduler's message for a pod no node can take: "0/2 nodes are available: ..."
    assert f"0/{len(k8s_lab.nodes)} nodes are available" in error, error
    assert_clean(kube)
