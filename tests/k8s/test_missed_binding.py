"""Making a parked pod again (missed_binding.py) on the real API server: the new pod is the
one asked for (its admission accepts what howfast sends again), and a pod that is not
howfast's is never touched. The scheduler's missed event itself cannot be provoked here:
its detection is tested in tests/unit/test_k8s_missed_binding.py."""

import time
from collections.abc import Iterator
from typing import Any

import pytest

from howfast.targets.k8s import names
from howfast.targets.k8s.cluster import Cluster
from tests.k8s.conftest import Kube
from tests.k8s.lab.cluster import ClusterFacts

pytestmark = pytest.mark.k8s

NAMESPACE = "default"


def _unschedulable_pod(name: str, image: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "automountServiceAccountToken": False,
            "nodeSelector": {"kubernetes.io/hostname": "no-such-node"},  # parked for ever
            "containers": [{"name": "c", "image": image, "command": ["sleep", "60"]}],
        },
    }


def _parked(cluster: Cluster, name: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pod = cluster.read("Pod", name, NAMESPACE) or {}
        conditions = (pod.get("status") or {}).get("conditions") or []
        if any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions):
            return pod
        time.sleep(0.5)
    raise AssertionError(f"pod {name} was not seen unschedulable in 60 s")


@pytest.fixture
def cluster(
    k8s_lab: ClusterFacts, kube: Kube, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Cluster]:
    monkeypatch.setenv("KUBECONFIG", str(k8s_lab.kubeconfig))
    yield Cluster()
    kube("delete", "pod", "-n", NAMESPACE, "hf-remade", "hf-not-ours", "--ignore-not-found",
         "--wait=false")  # fmt: skip


def test_a_parked_pod_of_howfast_is_made_again_and_another_is_left(
    cluster: Cluster, k8s_lab: ClusterFacts
):
    ours = _unschedulable_pod("hf-remade", k8s_lab.pg_image, names.labels("0a1b2c3d"))
    theirs = _unschedulable_pod("hf-not-ours", k8s_lab.pg_image, {"app": "theirs"})
    cluster.create(ours)
    cluster.create(theirs)
    before = _parked(cluster, "hf-remade")
    cluster.remake_parked_pod(NAMESPACE, before)
    after = cluster.read("Pod", "hf-remade", NAMESPACE)
    assert after is not None and after["metadata"]["uid"] != before["metadata"]["uid"]
    assert after["metadata"]["labels"] == before["metadata"]["labels"]
    assert after["spec"]["nodeSelector"] == before["spec"]["nodeSelector"]
    assert after["spec"]["containers"] == before["spec"]["containers"]
    other = _parked(cluster, "hf-not-ours")
    cluster.remake_parked_pod(NAMESPACE, other)
    still = cluster.read("Pod", "hf-not-ours", NAMESPACE)
    assert still is not None and still["metadata"]["uid"] == other["metadata"]["uid"]
