"""The real CloudNativePG operator in the lab (tests/k8s/lab/cnpg.py): built from its Go module,
installed with its own CRDs, RBAC and webhooks, running a 2-instance Cluster on the lab's
PostgreSQL image and StorageClass, reached through its `-rw` Service from a pod.

The operator is installed once per session (the `cnpg_operator` fixture), and the Cluster lab/pg
asked for as the session starts (conftest's `lab_pg_cluster`: a synchronous standby, WAL on a
volume of its own); it is shared with tests/k8s/test_cnpg.py, and the last test on it deletes
it (the lab's other tests expect no volume left)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.k8s.conftest import Kube
from tests.k8s.lab import cnpg, config
from tests.k8s.lab.cluster import ClusterFacts
from tests.k8s.objects import wait_for

pytestmark = pytest.mark.k8s
# the order of the tests on lab/pg (conftest's LAB_PG_MARKER): these first, on the Cluster as
# made; test_cnpg.py's runs next; the deletion last
ON_PG_FIRST, ON_PG_LAST = 10, 99

NS, NAME = cnpg.CLUSTER_NAMESPACE, cnpg.CLUSTER_NAME
SELECTOR = f"cnpg.io/cluster={NAME}"


def _status(kube: Kube) -> dict[str, Any]:
    return kube.get("cluster", NAME, "-n", NS).get("status", {})  # type: ignore[no-any-return]


@pytest.mark.lab_pg_cluster(ON_PG_FIRST)  # with the others: the operator is installed early
def test_the_operator_runs_and_its_webhooks_default_and_validate(
    cnpg_operator: float, k8s_lab: ClusterFacts, kube: Kube
) -> None:
    deployment = kube.get("deployment", cnpg.DEPLOYMENT, "-n", config.CNPG_NAMESPACE)
    assert deployment["status"].get("availableReplicas") == 1
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == config.CNPG_IMAGE
    # The mutating webhook fills the defaults (the CRD's schema does not know these).
    probe = cnpg.cluster_object(k8s_lab.default_storage_class, name="probe", namespace=NS)
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    made = json.loads(
        kube("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(probe)).stdout
    )
    initdb = made["spec"]["bootstrap"]["initdb"]
    assert (initdb["database"], initdb["owner"], initdb["encoding"]) == ("app", "app", "UTF8")
    # The validating webhook refuses what only the operator knows is wrong.
    probe["spec"]["imageName"] = "localhost/pgfio:latest"
    refused = kube("create", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False)
    assert refused.returncode != 0
    assert "Can't use 'latest' as image tag" in refused.stderr


@pytest.mark.lab_pg_cluster(ON_PG_FIRST)
def test_a_two_instance_cluster_gets_healthy_with_one_primary_and_one_standby(
    lab_pg_cluster: str, kube: Kube
) -> None:
    status = _status(kube)
    assert status["phase"] == cnpg.HEALTHY
    assert status["readyInstances"] == 2
    pods = kube.get("pods", "-n", NS, "-l", SELECTOR)["items"]
    roles = {p["metadata"]["name"]: p["metadata"]["labels"]["cnpg.io/instanceRole"] for p in pods}
    assert sorted(roles.values()) == ["primary", "replica"]
    primary = next(name for name, role in roles.items() if role == "primary")
    assert status["currentPrimary"] == status["targetPrimary"] == primary
    # Each instance runs the lab's image and has a data volume of the lab's default class and
    # a WAL volume (walStorage) of lab-wal, the class on a block device of its own.
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {config.PG_IMAGE}
    claims = kube.get("pvc", "-n", NS, "-l", SELECTOR)["items"]
    wanted = sorted([*roles, *(f"{name}-wal" for name in roles)])
    assert sorted(c["metadata"]["name"] for c in claims) == wanted
    classes = {c["metadata"]["name"]: c["spec"]["storageClassName"] for c in claims}
    assert classes == {
        name: config.SC_WAL if name.endswith("-wal") else config.SC_DISK for name in wanted
    }
    assert {c["status"]["phase"] for c in claims} == {"Bound"}


def _sql_pod(name: str, host: str, facts: ClusterFacts) -> dict[str, Any]:
    """psql through a Service name, with the app user's password from the Cluster's secret."""
    psql = [
        "psql", "-XAtq", "-v", "ON_ERROR_STOP=1",
        f"host={host} port=5432 user=app dbname=app sslmode=require connect_timeout=10",
        "-c", "select pg_is_in_recovery(), current_user, inet_server_addr()",
    ]  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "runAsUser": facts.pg_uid},
            "containers": [
                {
                    "name": "psql",
                    "image": facts.pg_image,
                    "imagePullPolicy": "Never",
                    "command": psql,
                    "env": [
                        {
                            "name": "PGPASSWORD",
                            "valueFrom": {
                                "secretKeyRef": {"name": f"{NAME}-app", "key": "password"}
                            },
                        }
                    ],
                }
            ],
        },
    }


def _run_sql_pod(kube: Kube, pod: dict[str, Any]) -> str:
    name = pod["metadata"]["name"]
    kube.apply(pod)

    def finished() -> str | None:
        phase = kube.get("pod", name, "-n", NS)["status"].get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    try:
        phase = wait_for(f"pod {name} to finish", finished, timeout=120)
        out = kube("logs", "-n", NS, name).stdout
        assert phase == "Succeeded", out
        return out.strip()
    finally:
        kube("delete", "pod", name, "-n", NS, "--ignore-not-found", "--wait=false")


@pytest.mark.lab_pg_cluster(ON_PG_FIRST)
def test_the_rw_service_resolves_and_answers_sql_from_a_pod(
    lab_pg_cluster: str, k8s_lab: ClusterFacts, kube: Kube
) -> None:
    primary = _status(kube)["currentPrimary"]
    primary_ip = kube.get("pod", primary, "-n", NS)["status"]["podIP"]
    rw = _run_sql_pod(kube, _sql_pod("psql-rw", f"{NAME}-rw.{NS}.svc", k8s_lab))
    assert rw == f"f|app|{primary_ip}"
    ro = _run_sql_pod(kube, _sql_pod("psql-ro", f"{NAME}-ro.{NS}.svc", k8s_lab))
    in_recovery, user, address = ro.split("|")
    assert (in_recovery, user) == ("t", "app")
    assert address != primary_ip


@pytest.mark.lab_pg_cluster(ON_PG_LAST)
def test_deleting_the_cluster_removes_its_pods_claims_services_and_secrets(
    lab_pg_cluster: str, kube: Kube
) -> None:
    def left() -> dict[str, list[str]]:
        """The Cluster's objects, by its label or by its name (the namespace holds nothing else
        of that name)."""
        found: dict[str, list[str]] = {}
        for item in kube.get("pod,pvc,service,secret,job,configmap", "-n", NS)["items"]:
            name, labels = item["metadata"]["name"], item["metadata"].get("labels") or {}
            if labels.get("cnpg.io/cluster") == NAME or name.startswith(f"{NAME}-"):
                found.setdefault(item["kind"], []).append(name)
        return found

    assert {"Pod", "PersistentVolumeClaim", "Service", "Secret"} <= set(left())
    kube("-n", NS, "delete", "cluster", NAME, "--wait=true", timeout=300)

    deadline = time.monotonic() + 120
    while (found := left()) and time.monotonic() < deadline:
        time.sleep(2)
    assert found == {}
    # The claims' volumes go too (the lab's classes reclaim with Delete).
    claimed = [
        pv["metadata"]["name"]
        for pv in kube.get("pv")["items"]
        if (pv["spec"].get("claimRef") or {}).get("namespace") == NS
    ]
    deadline = time.monotonic() + 120
    while claimed and time.monotonic() < deadline:
        time.sleep(2)
        claimed = [
            pv["metadata"]["name"]
            for pv in kube.get("pv")["items"]
            if (pv["spec"].get("claimRef") or {}).get("namespace") == NS
        ]
    assert claimed == []
