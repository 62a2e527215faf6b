"""`howfast run ... --in-cluster` on the lab: howfast's own image (tests/k8s/lab/howfast_image.py,
built from the lab's pgfio image and this checkout's wheel, imported into each node) runs the
run as a Job; the run comes back into this machine's store, and nothing labelled is left.
Also `howfast fetch`: a Job whose howfast here was killed (a terminal gone) runs to its end on
its own and is fetched later; and Ctrl-C, which deletes the Job and what its run made.

On the lab's pod network, as on a real cluster: the Job's pod reaches the API server with its
ServiceAccount's in-cluster configuration (the `kubernetes` Service), and the run's pods reach
each other by the names of their headless Service (docs/kubernetes.md)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.k8s import lanes
from tests.k8s.conftest import (
    LABEL,
    Kube,
    assert_clean,
    lab_images,
    reap,
    run_howfast,
    write_plan,
)
from tests.k8s.lab.cluster import ClusterFacts
from tests.k8s.lab.config import SC_DISK

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(420)]

PLAN = """
description = "tiny, in the cluster"
[settings]
shared_buffers = "32MB"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
duration = "{duration}"
"""
IN_CLUSTER_KINDS = ("job", "serviceaccount", "role", "rolebinding", "configmap", "pod")


@pytest.fixture(scope="module")
def image(howfast_image: str) -> str:
    """howfast's image of this checkout, in every node's containerd (conftest: built and
    imported as the lab comes up, while the first tests run)."""
    return howfast_image


@pytest.fixture(autouse=True)
def _tidy(howfast_env: dict[str, str]) -> Iterator[None]:
    """A test that failed half-way leaves a Job that runs on (cleanup --yes leaves a running
    in-cluster run alone): --force removes it and its run's objects, for the tests after."""
    yield
    subprocess.run(
        [sys.executable, "-m", "howfast", "cleanup", "--k8s", "--yes", "--force",
         *lanes.cleanup_scope()],
        env=howfast_env, capture_output=True, timeout=280, check=False,
    )  # fmt: skip


def _env(howfast_env: dict[str, str]) -> dict[str, str]:
    env = dict(howfast_env)
    env.pop("HOWFAST_K8S_NETWORK", None)  # the pod network, the default
    return env


def _args(k8s_lab: ClusterFacts, tmp_path: Path, image: str, duration: str) -> list[str]:
    plan = write_plan(tmp_path, PLAN.format(duration=duration))
    return ["run", plan, "--target", f"k8s://{SC_DISK}", *lab_images(k8s_lab), "--in-cluster",
            "--howfast-image", image, "--label", "in the cluster"]  # fmt: skip


def _assert_none_labelled(kube: Kube) -> None:
    assert_clean(kube)  # pods, claims, config maps, services, policies, secrets, volumes
    for kind in IN_CLUSTER_KINDS:
        labelled = kube.get(
            kind, *lanes.namespace_args(), "-l", "app.kubernetes.io/managed-by=howfast"
        )
        assert labelled["items"] == []


def test_in_cluster_run_comes_back_into_the_local_store(
    k8s_lab: ClusterFacts, kube: Kube, howfast_env: dict[str, str], tmp_path: Path, image: str
) -> None:
    env = _env(howfast_env)
    started = time.monotonic()
    # 68-78 s beside two busy loops here; CI's machine has been three times slower
    out = run_howfast(env, *_args(k8s_lab, tmp_path, image, "2s"), "--json", timeout=400)
    took = time.monotonic() - started
    doc = json.loads(out.stdout)
    assert doc["status"] == "completed", out.stderr
    assert doc["label"] == "in the cluster"
    (target,) = doc["targets"]
    assert target["kind"] == "k8s"
    assert doc["steps"][-1]["metrics"]["tps"] > 0
    # the Job's progress was shown here, and its run file was not
    assert "Job howfast-ic-" in out.stderr and "select-only" in out.stderr
    assert "howfast run file" not in out.stderr + out.stdout
    listed = json.loads(run_howfast(env, "results", "list", "--json").stdout)
    assert [r["label"] for r in listed] == ["in the cluster"]
    _assert_none_labelled(kube)
    print(f"in-cluster run: {took:.1f}s")


def _job_started(proc: subprocess.Popen[str], seen: list[str], timeout: float) -> str:
    """The Job's name once the run's first step shows in the progress howfast prints."""
    assert proc.stderr is not None
    job = None
    deadline = time.monotonic() + timeout
    for line in proc.stderr:
        seen.append(line)
        if job is None and "Job howfast-ic-" in line:
            job = line.split("Job ", 1)[1].split()[0]
        if job is not None and "[1/2]" in line:  # the run inside has started its first step
            return job
        assert time.monotonic() < deadline, "".join(seen)
    raise AssertionError(f"howfast ended before the Job's run started:\n{''.join(seen)}")


def _drain(proc: subprocess.Popen[str], seen: list[str]) -> threading.Thread:
    assert proc.stderr is not None
    stream = proc.stderr
    thread = threading.Thread(target=lambda: seen.extend(stream), daemon=True)
    thread.start()
    return thread


def test_a_job_left_by_a_killed_howfast_finishes_and_is_fetched(
    k8s_lab: ClusterFacts, kube: Kube, howfast_env: dict[str, str], tmp_path: Path, image: str
) -> None:
    env = _env(howfast_env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "howfast", *_args(k8s_lab, tmp_path, image, "3s")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen: list[str] = []
    try:
        job = _job_started(proc, seen, 180)
        proc.send_signal(signal.SIGKILL)  # the terminal is gone: nothing here deletes the Job
        proc.wait(timeout=10)
    finally:
        reap(proc)
    listed = json.loads(
        run_howfast(env, "cleanup", "--k8s", "--json", *lanes.cleanup_scope()).stdout
    )
    (found,) = [r for r in listed["runs"] if r["run"] == job.removeprefix("howfast-ic-")]
    assert found["state"] in ("running", "unknown") and not found["removed"]  # left alone
    assert {"kind": "ConfigMap", "name": job} in found["objects"]
    fetched = run_howfast(env, "fetch", job, "--json", timeout=200)
    doc = json.loads(fetched.stdout)
    assert doc["status"] == "completed", fetched.stderr
    assert doc["steps"][-1]["metrics"]["tps"] > 0
    listed_runs = json.loads(run_howfast(env, "results", "list", "--json").stdout)
    assert [r["label"] for r in listed_runs] == ["in the cluster"]
    _assert_none_labelled(kube)
    gone = run_howfast(env, "fetch", job, check=False)
    assert gone.returncode == 2 and f"no Job {job}" in gone.stderr


def test_ctrl_c_deletes_the_job_and_what_its_run_made(
    k8s_lab: ClusterFacts, kube: Kube, howfast_env: dict[str, str], tmp_path: Path, image: str
) -> None:
    env = _env(howfast_env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "howfast", *_args(k8s_lab, tmp_path, image, "120s")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen: list[str] = []
    try:
        _job_started(proc, seen, 180)
        reader = _drain(proc, seen)
        # the run inside has made its own objects (its server's pod beside the Job's)
        deadline = time.monotonic() + 60
        while len(kube.get("pod", *lanes.namespace_args(), "-l", LABEL)["items"]) < 2:
            assert time.monotonic() < deadline, "".join(seen)
            time.sleep(1)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=240)
        reader.join(timeout=10)
    finally:
        reap(proc)
    assert proc.returncode == 130, "".join(seen)
    assert "deleting Job howfast-ic-" in "".join(seen)
    _assert_none_labelled(kube)
    listed = json.loads(run_howfast(env, "results", "list", "--json").stdout)
    assert listed == []
