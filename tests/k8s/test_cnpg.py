"""Issue 37 item 6 on the lab: `cnpg://` targets on a real CloudNativePG operator. A
2-instance cluster (a primary and a standby) with synchronous replication:
`run quick --target cnpg://NS/pg --event 5s:delete-pod` completes, the operator promotes,
no commit is lost and the outage is stored with the operator's timeline; with an
asynchronous standby the loss found is recorded (not assumed); `cleanup` leaves the user's
cluster as it was and removes only howfast's objects and database.

Run on the lab's real CloudNativePG 1.27.1 operator, on the Cluster lab/pg the lab's tests
share (conftest's `lab_pg_cluster`: asked for as the session starts, so the operator makes it
while the other tests run; a synchronous standby and WAL on a volume of its own, on the lab's
block device of its own, `lab-wal`). The
asynchronous case is that Cluster with its standby made asynchronous, as a user would
(`postgresql.synchronous` removed): the same 2 instances, not a Cluster made again."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from howfast.analysis.instance_io import WAL_OWN
from howfast.report.instance_io_view import TITLE
from tests.k8s import lanes
from tests.k8s.conftest import (
    Kube,
    assert_clean,
    leftovers,
    run_howfast,
    wait_lab_pg_healthy,
    write_plan,
)
from tests.k8s.lab import cnpg
from tests.k8s.lab.cluster import ClusterFacts

# a run and a failover, on a loaded machine
pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]

NAMESPACE = cnpg.CLUSTER_NAMESPACE
# after test_cnpg_lab.py's first tests (10), before its deletion (99)
ON_PG_CLEANUP, ON_PG_SYNC, ON_PG_ASYNC = 20, 30, 40
SETTING_TIMEOUT_S = 180

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


def wait_healthy(kube: Kube, name: str) -> dict[str, Any]:
    assert name == cnpg.CLUSTER_NAME, name
    return wait_lab_pg_healthy(kube)


def primary_sql(kube: Kube, name: str, query: str) -> str:
    primary = kube.get("cluster", name, "-n", NAMESPACE)["status"]["currentPrimary"]
    return kube(
        "exec", "-n", NAMESPACE, primary, "-c", "postgres", "--", "psql", "-XAtc", query,
    ).stdout.strip()  # fmt: skip


def make_synchronous(kube: Kube, name: str, on: bool) -> None:
    """The user's Cluster with a synchronous standby (cnpg.SYNCHRONOUS) or an asynchronous
    one, as a user changes it; returns when its primary runs with that setting."""
    spec = kube.get("cluster", name, "-n", NAMESPACE)["spec"]
    has = "synchronous" in (spec.get("postgresql") or {})
    if has != on:
        change = (
            {"op": "add", "path": "/spec/postgresql/synchronous", "value": cnpg.SYNCHRONOUS}
            if on
            else {"op": "remove", "path": "/spec/postgresql/synchronous"}
        )
        kube("patch", "cluster", name, "-n", NAMESPACE, "--type=json",
             "-p", json.dumps([change]))  # fmt: skip
    deadline = time.monotonic() + SETTING_TIMEOUT_S
    while True:
        names = primary_sql(kube, name, "SHOW synchronous_standby_names")
        if bool(names) == on:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"synchronous_standby_names is {names!r} after the change")
        time.sleep(2)
    wait_healthy(kube, name)


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
    return primary_sql(kube, name, "SELECT datname FROM pg_database ORDER BY 1").split()


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
) -> tuple[dict[str, Any], str]:
    """The run's document and what `run` printed (its tables, not --json)."""
    before = user_objects(kube, name)
    databases = app_databases(kube, name)
    target = f"cnpg://{NAMESPACE}/{name}"
    wide = {**env, "COLUMNS": "250"}  # every table's row on one line
    out = run_howfast(wide, "run", write_plan(tmp_path, PLAN), "--target", target,
                      "--event", "5s:delete-pod", timeout=900)  # fmt: skip
    doc = json.loads(run_howfast(env, "results", "show", "1", "--json").stdout)
    assert doc["status"] == "completed", out.stderr
    wait_healthy(kube, name)
    assert user_objects(kube, name)["spec"] == before["spec"]
    assert user_objects(kube, name)["secrets"] == before["secrets"]
    assert app_databases(kube, name) == databases  # howfast's database is gone
    assert_only_the_user_s_left(kube, name)
    return dict(doc), out.stdout


def instance_io_lines(printed: str) -> dict[str, str]:
    """The rows of the printed 'WAL and data I/O of every instance' table, by instance."""
    text = printed[printed.index(TITLE) :]
    rows: dict[str, str] = {}
    for line in text.splitlines():
        for instance in ("pg-1", "pg-2"):
            if f" {instance} " in f" {line} " or f" {instance}," in line:
                rows.setdefault(instance, line)
    return rows


@pytest.mark.lab_pg_cluster(ON_PG_SYNC)
def test_a_synchronous_cluster_fails_over_through_the_operator_and_loses_nothing(
    tmp_path: Path,
    howfast_env: dict[str, str],
    kube: Kube,
    k8s_lab: ClusterFacts,
    lab_pg_cluster: str,
) -> None:
    make_synchronous(kube, lab_pg_cluster, on=True)  # as made (a test run alone after async)
    doc, printed = run_with_delete_pod(tmp_path, howfast_env, kube, lab_pg_cluster)
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
    # lab/pg's WAL is on a volume of its own (walStorage), found from the Cluster and pods
    assert design["wal_on_data_volume"] is False
    assert design["wal_storage_class"] == k8s_lab.wal_storage_class
    # every instance's own I/O, by volume role
    (step,) = [s for s in doc["steps"] if s["workload"] == "pgbench"]
    instances = step["io"]["instances"]
    assert set(instances) == {"pg-1", "pg-2"}, instances
    # a pod made again within the step (the deleted primary) is followed: its readings, by
    # pod. A pod read once only (gone at its next reading, or found again just before the
    # step's end) has no figures: no "seconds", no "roles" (samplers/instances.py). Every
    # instance has a pod read over time, and every such reading has its roles.
    readings = {
        name: [r for r in i.get("pods", [i]) if r and "seconds" in r]
        for name, i in instances.items()
    }
    assert all(readings.values()), instances
    assert all("data" in r["roles"] for rs in readings.values() for r in rs), instances
    # The WAL volume's class (lab-wal) is a block device of its own (a loop device), the data
    # volume's a directory on the cache's disk: "wal" is a role of its own, read apart.
    assert all("wal" in r["roles"] for rs in readings.values() for r in rs), instances

    def wal_written(name: str) -> int:
        return sum(r["roles"]["wal"]["write_bytes"] for r in readings[name])

    # Both write WAL during a pgbench step: the primary its own, the synchronous standby what
    # it receives (it must flush it before the primary's commit returns).
    assert wal_written("pg-1") > 0 and wal_written("pg-2") > 0, instances
    # `run` prints each instance's WAL and data I/O (not only the JSON), WAL on its own device
    rows = instance_io_lines(printed)
    assert set(rows) == {"pg-1", "pg-2"}, printed
    assert all(WAL_OWN in row for row in rows.values()), rows


@pytest.mark.lab_pg_cluster(ON_PG_ASYNC)
def test_an_asynchronous_cluster_records_the_loss_it_finds(
    tmp_path: Path, howfast_env: dict[str, str], kube: Kube, lab_pg_cluster: str
) -> None:
    make_synchronous(kube, lab_pg_cluster, on=False)  # the user's standby made asynchronous
    doc, _ = run_with_delete_pod(tmp_path, howfast_env, kube, lab_pg_cluster)
    (target,) = doc["targets"]
    assert target["device"]["cnpg"]["replication"]["synchronous"] is False
    event = _event(doc)
    # counted on the surviving primary, whatever it finds (0 is possible: not assumed)
    assert isinstance(event["lost_commits"], int) and event["lost_commits"] >= 0


@pytest.mark.lab_pg_cluster(ON_PG_CLEANUP)
def test_cleanup_leaves_the_user_s_cluster_and_removes_only_howfast_s(
    howfast_env: dict[str, str], kube: Kube, lab_pg_cluster: str
) -> None:
    before = user_objects(kube, lab_pg_cluster)
    databases = app_databases(kube, lab_pg_cluster)
    run_howfast(howfast_env, "cleanup", "--k8s", "--yes", *lanes.cleanup_scope())
    assert user_objects(kube, lab_pg_cluster) == before
    assert app_databases(kube, lab_pg_cluster) == databases
    wait_healthy(kube, lab_pg_cluster)


@pytest.mark.lab_pg_cluster(ON_PG_CLEANUP)  # with the others: the operator is installed early
def test_a_cluster_made_through_the_operator_is_run_on_then_gone(
    tmp_path: Path,
    howfast_env: dict[str, str],
    kube: Kube,
    k8s_lab: ClusterFacts,
    cnpg_operator: float,
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
