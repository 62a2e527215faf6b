"""A fleet on the lab cluster: each class on its own StorageClass, one pod and claim per
instance, all loaded together; per-class figures, the classes' provisioners recorded, and
nothing of howfast's left afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.k8s.conftest import Kube, assert_clean, lab_images, run_howfast, write_plan
from tests.k8s.lab.cluster import ClusterFacts
from tests.k8s.lab.config import PROVISIONER_DISK, PROVISIONER_TMPFS, SC_DISK, SC_TMPFS

pytestmark = pytest.mark.k8s

FLEET_PLAN = f"""
description = "two classes on two StorageClasses"
[settings]
shared_buffers = "16MB"
[fleet]
classes = [
  {{ name = "disk", count = 1, storage_class = "{SC_DISK}" }},
  {{ name = "tmpfs", count = 2, storage_class = "{SC_TMPFS}" }},
]
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
duration = "3s"
"""


def test_a_fleet_of_two_storage_classes(
    k8s_lab: ClusterFacts, kube: Kube, howfast_env: dict[str, str], tmp_path: Path
) -> None:
    plan = write_plan(tmp_path, FLEET_PLAN)
    capped = write_plan(
        tmp_path, FLEET_PLAN.replace("count = 1,", "count = 1, iops = 100,"), "capped.toml"
    )
    refused = run_howfast(
        howfast_env, "run", capped, "--target", f"k8s://{SC_DISK}", *lab_images(k8s_lab),
        check=False,
    )  # fmt: skip
    assert refused.returncode == 2 and "cannot cap a pod's I/O" in refused.stderr
    out = run_howfast(
        howfast_env, "run", plan, "--target", f"k8s://{SC_DISK}", *lab_images(k8s_lab), "--json",
    )  # fmt: skip
    doc = json.loads(out.stdout)
    assert doc["status"] == "completed", out.stderr
    assert len(doc["targets"]) == 3 and len(doc["steps"]) == 6
    assert all(s["status"] == "completed" for s in doc["steps"]), doc["steps"]
    provisioners = {
        t["device"]["fleet"]["class"]: t["device"]["data"]["storage_class"]["provisioner"]
        for t in doc["targets"]
    }
    assert provisioners == {"disk": PROVISIONER_DISK, "tmpfs": PROVISIONER_TMPFS}
    text = run_howfast(howfast_env, "results", "show", str(doc["id"])).stdout
    assert "StorageClass lab-tmpfs" in text
    classes = {c["class"]: c for c in doc["fleet"]["classes"]}
    assert classes["tmpfs"]["instances"] == 2 and classes["tmpfs"]["completed"] == 2
    assert classes["disk"]["storage_class"] == SC_DISK
    assert all(c["tps_total"] > 0 for c in classes.values())
    assert any("not verifiable from outside the node" in v for v in doc["fleet"]["verdicts"])
    assert_clean(kube)
