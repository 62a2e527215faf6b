"""k8s://CLASS targets end to end on the lab cluster: runs, compare, probe, --dry-run against
the API server's own validation, Ctrl-C, a Pending claim, a missing image, and the clean-up of
a SIGKILLed run. Every test ends with nothing of howfast's left in the cluster."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from howfast.runner.target_session import private_tmp
from tests.k8s import lanes
from tests.k8s.conftest import (
    LABEL,
    Kube,
    assert_clean,
    lab_images,
    leftovers,
    reap,
    run_howfast,
    wait_for_line,
    write_plan,
)
from tests.k8s.lab.cluster import ClusterFacts
from tests.k8s.lab.config import SC_DISK, SC_TMPFS

pytestmark = pytest.mark.k8s
# These tests measure in the server's pod (one pod a target: faster on the small lab);
# tests/k8s/test_client.py and test_replicas.py place clients in pods of their own.
SAME_POD = ("--client", "same-pod")

TINY_PLAN = """
description = "tiny"
[settings]
shared_buffers = "32MB"
[[steps]]
workload = "fio"
profiles = ["wal-fsync"]
size = "16MiB"
runtime = "2s"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only", "tpcb-like"]
clients = [2]
duration = "3s"
"""
COMPARE_STEPS = """
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [2]
duration = "3s"
"""
LONG_PLAN = """
description = "long"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [2]
duration = "120s"
rate = 50  # it only holds the pod while the test interrupts the run
"""


def test_tiny_run_on_one_class(
    k8s_lab: ClusterFacts, kube: Kube, howfast_env: dict[str, str], tmp_path: Path
) -> None:
    started = time.monotonic()
    out = run_howfast(
        howfast_env, "run", write_plan(tmp_path, TINY_PLAN), "--target", f"k8s://{SC_DISK}",
        *lab_images(k8s_lab), *SAME_POD, "--memory", "512MiB", "--cpu", "1", "--json",
    )  # fmt: skip
    doc = json.loads(out.stdout)
    assert doc["status"] == "completed", out.stderr
    assert [s["status"] for s in doc["steps"]] == ["completed"] * 4
    target = doc["targets"][0]
    assert target["kind"] == "k8s" and target["pg_version"].startswith("15.")
    assert target["settings"]["shared_buffers"] == "32MB"
    kubernetes = target["device"]["kubernetes"]
    assert kubernetes["server_version"] == f"v{k8s_lab.k8s_version}"
    assert kubernetes["pod"]["resources"]["postgres"]["limits"] == {"cpu": "1", "memory": "512Mi"}
    assert target["device"]["data"]["storage_class"]["provisioner"]
    tps = [s["metrics"]["tps"] for s in doc["steps"] if s["workload"] == "pgbench"]
    assert all(t > 0 for t in tps)
    assert "PGPASSWORD" not in out.stderr
    # Samplers in the pod: the claim's disk on the node, the node's CPU, the server
    # container's own cgroup, each saying where its figures came from.
    shown = run_howfast(howfast_env, "results", "show", str(doc["id"]), "--json", "--series")
    tpcb = next(
        s for s in json.loads(shown.stdout)["steps"] if s["params"].get("mode") == "tpcb-like"
    )
    io, cpu, series = tpcb["io"], tpcb["cpu"], tpcb["series"]
    data = io["roles"]["data"]
    assert data["device"] and data["fstype"] == "ext4", io
    assert io["source"].startswith("the node's /proc/diskstats, by exec in pod")
    write_iops = [v for _, v in series["io.data.write_iops"]]
    assert max(write_iops) > 0 and tpcb["metrics"]["io_data_write_iops"] > 0
    assert cpu["source"].startswith("the node's /proc/stat") and cpu["idle_pct"] < 100
    assert [k for k in series if k.startswith("cpu.") and k.endswith("_pct")]
    assert "load_generator" not in cpu and "tools container" in cpu["load_generator_note"]
    server = cpu["server_container"]
    assert server["cpu_s"] > 0 and server["source"].startswith("cgroup v1 of the server")
    pg = io["postgres"]
    # below the cgroup root of the kubelet that ran the pod (the lab's nodes have different ones)
    cgroup_root = k8s_lab.node_cgroup_roots[kubernetes["node"]["name"]].rstrip("/")
    assert pg["cgroup"].startswith(f"{cgroup_root}/kubepods/"), pg
    assert pg["proc"]["write_bytes"] > 0, pg
    print(
        f"tiny run on {SC_DISK}: {time.monotonic() - started:.1f} s, tps {tps}, "
        f"{data['device']} write IOPS {tpcb['metrics']['io_data_write_iops']}, "
        f"server CPU {server['cpu_pct']}% of a core, pg wrote {pg['proc']['write_bytes']} B"
    )
    assert_clean(kube)


def test_two_classes_and_compare(
    k8s_lab: ClusterFacts, kube: Kube, howfast_env: dict[str, str], tmp_path: Path
) -> None:
    # fio and tpcb-like are covered by the tiny run: here what matters is two classes side by side
    # One run: comparing two runs is the store's business, tested without a cluster; what a
    # cluster adds is two classes' targets in one run, set side by side by `compare RUN`.
    plan = write_plan(tmp_path, TINY_PLAN.split("[[steps]]", 1)[0] + COMPARE_STEPS)
    out = run_howfast(
        howfast_env, "run", plan, "--target", f"k8s://{SC_DISK}",
        "--target", f"k8s://{SC_TMPFS}", *lab_images(k8s_lab), *SAME_POD, "--json",
    )  # fmt: skip
    doc = json.loads(out.stdout)
    assert doc["status"] == "completed"
    names = [f"k8s://{SC_DISK}", f"k8s://{SC_TMPFS}"]
    assert [t["name"] for t in doc["targets"]] == names
    run_id = str(doc["id"])
    compared = json.loads(run_howfast(howfast_env, "compare", run_id, "--json").stdout)
    assert [side["target"] for side in compared["runs"]] == names
    text = run_howfast(howfast_env, "compare", run_id).stdout
    assert "select-only" in text
    assert all(name in text for name in names), text
    assert_clean(kube)


def test_probe_a_class(k8s_lab: ClusterFacts, kube: Kube, howfast_env: dict[str, str]) -> None:
    out = run_howfast(
        howfast_env, "probe", f"k8s://{SC_DISK}", "--size", "16MiB", "--runtime", "2s",
        "--profile", "randrw-4k-qd1", "--profile", "pg_test_fsync", "--fsync-seconds", "1",
        *lab_images(k8s_lab), "--json",
    )  # fmt: skip
    doc = json.loads(out.stdout)
    assert doc["status"] == "completed", doc
    fio = doc["steps"][0]["metrics"]
    assert fio["read_iops"] > 0 and fio["write_iops"] > 0
    assert doc["steps"][1]["metrics"]
    assert_clean(kube)


def test_dry_run_manifests_pass_server_side_dry_run(
    k8s_lab: ClusterFacts, kube: Kube, howfast_env: dict[str, str]
) -> None:
    """The printed objects are what the API server (admission: restricted Pod Security
    included) accepts; nothing is created."""
    ns = "howfast-dry"
    kube("create", "namespace", ns)
    try:
        kube(
            "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted",
            "pod-security.kubernetes.io/enforce-version=latest",
        )  # fmt: skip
        env = {**howfast_env, "KUBECONFIG": "/nonexistent"}  # no cluster needed to print
        out = run_howfast(
            env, "run", "quick", "--target", f"k8s://{SC_DISK}?wal={SC_TMPFS}",
            "--namespace", ns, *lab_images(k8s_lab), "--memory", "1GiB", "--dry-run", "--json",
        )  # fmt: skip
        (target,) = json.loads(out.stdout)["targets"]
        manifests: list[dict[str, Any]] = target["manifests"]
        assert manifests[0]["kind"] == "Secret"
        # the client pod (--client pod, the default), printed apart: restricted too
        (client,) = target["client"]["manifests"]
        assert client["metadata"]["name"] == f"{manifests[0]['metadata']['name']}-client"
        manifests.append(client)
        for manifest in manifests:
            manifest["metadata"].pop("ownerReferences", None)  # the owner's uid: UID here
            manifest["metadata"]["name"] += "-dry"  # names need not exist
        text = "\n".join(json.dumps(m) for m in manifests)
        proc = kube("apply", "--dry-run=server", "-f", "-", input=text)
        assert proc.stdout.count("(server dry run)") == len(manifests)
        assert leftovers(kube) == {}
    finally:
        kube("delete", "namespace", ns, "--wait=false")


def test_ctrl_c_during_pgbench_leaves_nothing(
    k8s_lab: ClusterFacts, kube: Kube, howfast_env: dict[str, str], tmp_path: Path
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "howfast", "run", write_plan(tmp_path, LONG_PLAN),
         "--target", f"k8s://{SC_DISK}", *lab_images(k8s_lab), *SAME_POD],
        env=howfast_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for_line(proc, "[2/2] pgbench select-only", timeout=150)
        time.sleep(4)  # pgbench is running in the pod
        assert kube.get("pod", "-A", "-l", LABEL)["items"]
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=180)
    finally:
        reap(proc)
    assert proc.returncode != 0
    assert leftovers(kube) == {}  # stop() waited for the pod, the claim and the volume


def test_pending_claim_fails_with_the_reason(
    k8s_lab: ClusterFacts, kube: Kube, howfast_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**howfast_env, "HOWFAST_K8S_START_TIMEOUT": "15"}
    started = time.monotonic()
    out = run_howfast(
        env, "run", write_plan(tmp_path, TINY_PLAN), "--target", f"k8s://{k8s_lab.no_provisioner_class}",
        *lab_images(k8s_lab), "--json", check=False,
    )  # fmt: skip
    assert time.monotonic() - started < 90
    doc = json.loads(out.stdout)
    assert doc["status"] == "failed"
    error = doc["steps"][0]["error"]
    assert "PersistentVolumeClaim" in error and "Pending" in error
    assert "kubernetes.io/no-provisioner" in error
    assert_clean(kube)


def test_missing_image_fails_clearly(
    k8s_lab: ClusterFacts, kube: Kube, howfast_env: dict[str, str], tmp_path: Path
) -> None:
    started = time.monotonic()
    out = run_howfast(
        howfast_env, "run", write_plan(tmp_path, TINY_PLAN), "--target", "k8s://emptyDir",
        "--image", "localhost/no-such-image:1", "--fio-image", k8s_lab.pg_image, "--json",
        check=False,
    )  # fmt: skip
    assert time.monotonic() - started < 90
    doc = json.loads(out.stdout)
    error = doc["steps"][0]["error"]
    assert "localhost/no-such-image:1" in error and "ErrImageNeverPull" in error
    assert_clean(kube)


def test_cleanup_removes_what_a_killed_run_left(
    k8s_lab: ClusterFacts, kube: Kube, howfast_env: dict[str, str], tmp_path: Path
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "howfast", "run", write_plan(tmp_path, LONG_PLAN),
         "--target", f"k8s://{SC_TMPFS}", *lab_images(k8s_lab), *SAME_POD],
        env=howfast_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for_line(proc, "[2/2]", timeout=150)
        listed = run_howfast(
            howfast_env, "cleanup", "--k8s", "--json", *lanes.cleanup_scope()
        ).stdout
        (running,) = json.loads(listed)["runs"]
        assert running["state"] == "running" and not running["removed"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        reap(proc)
        # and its private directory on this machine (named with its PID) stays too: the test
        # removes what the killed howfast would have
        scratch = list(Path(private_tmp()).glob(f"howfast-work-{proc.pid}-*"))
        for directory in scratch:
            shutil.rmtree(directory)
    assert len(scratch) == 1, scratch
    assert leftovers(kube)  # SIGKILL cannot be caught: the objects stay
    out = json.loads(
        run_howfast(
            howfast_env, "cleanup", "--k8s", "--yes", "--json", *lanes.cleanup_scope()
        ).stdout
    )
    (run,) = out["runs"]
    assert run["state"] == "gone" and run["removed"]
    assert {o["kind"] for o in run["objects"]} >= {"Pod", "PersistentVolumeClaim", "Secret"}
    assert leftovers(kube) == {}
    again = json.loads(
        run_howfast(howfast_env, "cleanup", "--k8s", "--json", *lanes.cleanup_scope()).stdout
    )
    assert again["runs"] == []
