"""The REST paths howfast sends its JSON to (targets/k8s/restpaths.py): as the API server
names them, for namespaced and cluster-wide kinds, subresources and custom resources."""

from __future__ import annotations

import pytest

from howfast.targets.k8s import restpaths as rp


def test_namespaced_kinds_have_a_collection_an_object_and_subresources() -> None:
    assert rp.path("Pod", "bench") == "/api/v1/namespaces/bench/pods"
    assert rp.path("Pod", "bench", "howfast-1") == "/api/v1/namespaces/bench/pods/howfast-1"
    assert rp.path("Pod", "bench", "p", "log") == "/api/v1/namespaces/bench/pods/p/log"
    assert rp.path("Pod", "b", "p", "eviction") == "/api/v1/namespaces/b/pods/p/eviction"
    assert (
        rp.path("NetworkPolicy", "b", "np")
        == "/apis/networking.k8s.io/v1/namespaces/b/networkpolicies/np"
    )
    assert rp.path("Job", "b") == "/apis/batch/v1/namespaces/b/jobs"


def test_without_a_namespace_a_namespaced_kind_is_listed_across_all_of_them() -> None:
    assert rp.path("PersistentVolumeClaim") == "/api/v1/persistentvolumeclaims"
    assert rp.path("NetworkPolicy") == "/apis/networking.k8s.io/v1/networkpolicies"


def test_cluster_wide_kinds_ignore_a_namespace() -> None:
    assert rp.path("Node", name="n1") == "/api/v1/nodes/n1"
    assert rp.path("PersistentVolume", "bench", "pv-1") == "/api/v1/persistentvolumes/pv-1"
    assert rp.path("StorageClass", name="fast") == "/apis/storage.k8s.io/v1/storageclasses/fast"
    assert rp.path("Namespace", name="bench") == "/api/v1/namespaces/bench"


def test_custom_resources_and_names_that_need_quoting() -> None:
    assert (
        rp.custom_path("postgresql.cnpg.io", "v1", "clusters", "db", "pg", "status")
        == "/apis/postgresql.cnpg.io/v1/namespaces/db/clusters/pg/status"
    )
    assert rp.custom_path("g", "v1", "databases") == "/apis/g/v1/databases"
    assert rp.path("Pod", "a/b", "c?d") == "/api/v1/namespaces/a%2Fb/pods/c%3Fd"


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(KeyError):
        rp.path("Deployment", "bench")
