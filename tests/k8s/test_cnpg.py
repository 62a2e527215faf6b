"""Issue 37 item 6 on the lab: `cnpg://` targets on a real CloudNativePG operator. A
2-instance cluster (a primary and a standby) with synchronous replication:
`run quick --target cnpg://NS/pg --event 5s:delete-pod` completes, the operator promotes,
no commit is lost and the outage is stored with the operator's timeline; with an
asynchronous standby the loss found is recorded (not assumed); `cleanup` leaves the user's
cluster as it was and removes only howfast's objects and database.

Run on the lab's real CloudNativePG 1.27.1 operator (the `cnpg_operator` fixture, else an
operator installed by hand: its CRD; without either every test is skipped saying so)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.k8s.conftest import Kube, assert_clean, leftovers, run_howfast, write_plan
from tests.k8s.lab.cluster import ClusterFacts

# a Cluster made (initdb, then its standby joins), a run and a failover, on a loaded machine
pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]

CRD = "clusters.postgresql.cnpg.io"
NAMESPACE = "howfast-cnpg-test"
READY_TIMEOUT_S = 600

PLAN = """
description = "cnpg quick"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [2]
duration = "20s"
"""


@pytest.fixture(scope="session")
def operator_ready(request: pytest.FixtureRequest, kube: Kube) -> None:
    """The operator: the lab's `cnpg_operator` fixture installs it (branch wip-cnpg, issue 37
    item 2); without that fixture, an operator installed by hand (its CRD), else a skip."""
    try:
        request.getfixturevalue("cnpg_operator")
        return
    except pytest.FixtureLookupError:
        pass
    found = kube("get", "crd", CRD, "-o", "name", check=False)
    if found.returncode != 0:
        pytest.skip(f"the CloudNativePG operator is not installed in the lab (no CRD {CRD})")


def cluster_manifest(name: str, facts: ClusterFacts, synchronous: bool) -> dict[str, Any]:
    """A 2-instance Cluster on the lab's PostgreSQL image (the operator reads the major
    version from its tag), superuser access off: howfast uses the app user's secret and makes
    its database through a Database resource."""
    postgresql: dict[str, Any] = {"parameters": {"shared_buffers": "32MB"}}
    if synchronous:
        postgresql["synchronous"] = {"method": "any", "number": 1, "dataDurability": "required"}
    return {
        "apiVersion": "postgresql.cnpg.io/v1",
        "kind": "Cluster",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "instances": 2,
            "imageName": facts.pg_image,
            "imagePullPolicy": "Never",  # the lab's images are imported, not pulled
            "postgresUID": facts.pg_uid,
            "postgresGID": facts.pg_gid,
            "postgresql": postgresql,
            "storage": {"size": "1Gi", "storageClass": facts.default_storage_class},
        },
    }


def wait_healthy(kube: Kube, name: str) -> dict[str, Any]:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        cluster = kube.get("cluster", name, "-n", NAMESPACE)
        status = cluster.get("status") or {}
        if status.get("phase") == "Cluster in healthy state" and status.get("readyInstances") == 2:
            return dict(cluster)
        if time.monotonic() > deadline:
            raise AssertionError(f"Cluster {name} not healthy: {json.dumps(status)[:2000]}")
        time.sleep(2)


@pytest.fixture
def user_cluster(
    request: pytest.FixtureRequest, kube: Kube, k8s_lab: ClusterFacts, operator_ready: None
) -> Iterator[str]:
    """The user's cluster (made by the test, as a user would, not by howfast)."""
    synchronous = bool(getattr(request, "param", True))
    name = "pg" if synchronous else "pg-async"
    kube("create", "namespace", NAMESPACE, check=False)
    kube.apply(cluster_manifest(name, k8s_lab, synchronous))
    try:
        wait_healthy(kube, name)
        yield name
    finally:
        kube("delete", "cluster", name, "-n", NAMESPACE, "--wait=true", check=False, timeout=300)


def user_objects(kube: Kube, name: str) -> dict[str, Any]:
    """What of the user's cluster must not change: its spec, its secrets' names, its
    application database's tables."""
    cluster = kube.get("cluster", name, "-n", NAMESPACE)
    secrets = kube.get("secret", "-n", NAMESPACE, "-l", f"cnpg.io/cluster={name}")
    return {
        "spec": cluster["spec"],
        "secrets": sorted(s["metadata"]["name"] for s in secrets["items"]),
        "resourceVersions": sorted(s["metadata"]["resourceVersion"] for s in secrets["items"]),
    }


def app_databases(kube: Kube, name: str) -> list[str]:
    primary = kube.get("cluster", name, "-n", NAMESPACE)["status"]["currentPrimary"]
    out = kube(
        "exec", "-n", NAMESPACE, primary, "-c", "postgres", "--", "psql", "-XAtc",
        "SELECT datname FROM pg_database ORDER BY 1",
    ).stdout  # fmt: skip
    return out.split()


def assert_only_the_user_s_left(kube: Kube, name: str, timeout: float = 60) -> None:
    """Nothing labelled as howfast's, and no volume but the user's cluster's (conftest's
    assert_clean wants no volume at all: the user's cluster keeps its own)."""
    claims = kube.get("pvc", "-n", NAMESPACE, "-l", f"cnpg.io/cluster={name}")["items"]
    users = {c["spec"].get("volumeName") for c in claims}
    deadline = time.monotonic() + timeout
    while True:
        left = leftovers(kube)
        left["pv"] = [v for v in left.get("pv", []) if v not in users]
        left = {kind: names for kind, names in left.items() if names}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert left == {}


def _event(doc: dict[str, Any]) -> dict[str, Any]:
    (step,) = [s for s in doc["steps"] if s["workload"] == "pgbench"]
    assert step["status"] == "completed", step.get("error")
    (event,) = step["events"]
    return dict(event)


def run_with_delete_pod(
    tmp_path: Path, env: dict[str, str], kube: Kube, name: str
) -> dict[str, Any]:
    before = user_objects(kube, name)
    databases = app_databases(kube, name)
    target = f"cnpg://{NAMESPACE}/{name}"
    out = run_howfast(env, "run", write_plan(tmp_path, PLAN), "--target", target,
                      "--event", "5s:delete-pod", "--json", timeout=900)  # fmt: skip
    doc = json.loads(out.stdout)
    assert doc["status"] == "completed", out.stderr
    wait_healthy(kube, name)
    assert user_objects(kube, name)["spec"] == before["spec"]
    assert user_objects(kube, name)["secrets"] == before["secrets"]
    assert app_databases(kube, name) == databases  # howfast's database is gone
    assert_only_the_user_s_left(kube, name)
    return dict(doc)


@pytest.mark.parametrize("user_cluster", [True], indirect=True)
def test_a_synchronous_cluster_fails_over_through_the_operator_and_loses_nothing(
    tmp_path: Path, howfast_env: dict[str, str], kube: Kube, user_cluster: str
) -> None:
    doc = run_with_delete_pod(tmp_path, howfast_env, kube, user_cluster)
    (target,) = doc["targets"]
    design = target["device"]["cnpg"]
    assert design["instances"] == 2 and design["replication"]["synchronous"] is True
    event = _event(doc)
    assert event["verified"] is True, event
    evidence = event["evidence"]
    assert evidence["through"] == "operator"
    assert evidence["new_primary"] != evidence["old_primary"]
    timeline = evidence["timeline"]
    assert timeline["promoted_s"] is not None and timeline["rw_moved_s"] is not None
    assert event["lost_commits"] == 0
    assert event["downtime_s"] > 0
    # every instance's own I/O, by volume role (the lab's Cluster keeps its WAL in PGDATA)
    (step,) = [s for s in doc["steps"] if s["workload"] == "pgbench"]
    instances = step["io"]["instances"]
    assert set(instances) == {"pg-1", "pg-2"}, instances
    # a pod made again within the step (the deleted primary) is followed: its readings, by pod
    readings = [r for i in instances.values() for r in i.get("pods", [i])]
    assert all("data" in r["roles"] for r in readings), instances


@pytest.mark.parametrize("user_cluster", [False], indirect=True)
def test_an_asynchronous_cluster_records_the_loss_it_finds(
    tmp_path: Path, howfast_env: dict[str, str], kube: Kube, user_cluster: str
) -> None:
    doc = run_with_delete_pod(tmp_path, howfast_env, kube, user_cluster)
    (target,) = doc["targets"]
    assert target["device"]["cnpg"]["replication"]["synchronous"] is False
    event = _event(doc)
    # counted on the surviving primary, whatever it finds (0 is possible: not assumed)
    assert isinstance(event["lost_commits"], int) and event["lost_commits"] >= 0


@pytest.mark.parametrize("user_cluster", [True], indirect=True)
def test_cleanup_leaves_the_user_s_cluster_and_removes_only_howfast_s(
    tmp_path: Path, howfast_env: dict[str, str], kube: Kube, user_cluster: str
) -> None:
    before = user_objects(kube, user_cluster)
    databases = app_databases(kube, user_cluster)
    run_howfast(howfast_env, "cleanup", "--k8s", "--yes")
    assert user_objects(kube, user_cluster) == before
    assert app_databases(kube, user_cluster) == databases
    wait_healthy(kube, user_cluster)


def test_a_cluster_made_through_the_operator_is_run_on_then_gone(
    tmp_path: Path,
    howfast_env: dict[str, str],
    kube: Kube,
    k8s_lab: ClusterFacts,
    operator_ready: None,
) -> None:
    """k8s://CLASS?operator=cnpg&instances=2&sync=on: the operator makes the Cluster,
    the plan runs on it, and nothing of it is left (its pods, claims and volumes)."""
    text = f"k8s://{k8s_lab.default_storage_class}?operator=cnpg&instances=2&sync=on"
    out = run_howfast(howfast_env, "run", write_plan(tmp_path, PLAN), "--target", text,
                      "--image", k8s_lab.pg_image, "--volume-size", "1Gi", "--json",
                      timeout=900)  # fmt: skip
    doc = json.loads(out.stdout)
    assert doc["status"] == "completed", out.stderr
    (target,) = doc["targets"]
    design = target["device"]["cnpg"]
    assert design["made_by_howfast"] is True and design["instances"] == 2
    assert design["replication"]["method"] == "any"
    assert kube.get("cluster", "-A", "-l", "app.kubernetes.io/managed-by=howfast")["items"] == []
    assert_clean(kube)
