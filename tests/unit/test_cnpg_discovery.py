"""What a CloudNativePG cluster is made of, from its objects. HAND-MADE objects
(tests/data/cnpg/handmade/: from the v1.27.1 API types, to be replaced by recordings)."""

from __future__ import annotations

import copy

import pytest

from howfast.errors import UsageError
from howfast.targets.cnpg import discovery as disc
from tests.unit.cnpg_objects import items, load


def pg() -> disc.ClusterLayout:
    return disc.layout(load("cluster-pg.json"), items("pods-pg.json"), items("pvcs-pg.json"))


def test_the_primary_its_standbys_their_nodes_and_volumes() -> None:
    layout = pg()
    assert layout.primary().name == "pg-1" and layout.primary().role == "primary"
    assert [i.name for i in layout.standbys()] == ["pg-2", "pg-3"]
    assert layout.nodes() == ("n1", "n2", "n3")
    first = layout.instance("pg-2")
    assert first is not None and first.data is not None and first.wal is not None
    assert (first.data.claim, first.data.storage_class, first.data.size) == ("pg-2", "fast", "10Gi")
    assert (first.wal.claim, first.wal.storage_class) == ("pg-2-wal", "wal-class")
    assert first.metrics_port == 9187 and first.ready
    assert disc.storage_classes(layout) == {"data": "fast", "wal": "wal-class"}
    assert layout.rw_service == "pg-rw"
    assert disc.not_ready(layout) is None


def test_the_design_record_says_the_synchronous_settings() -> None:
    record = pg().design_record()
    assert record["instances"] == 3 and record["primary"] == "pg-1"
    assert record["replication"] == {
        "synchronous": True, "method": "any", "number": 1, "data_durability": "required",
        "min_sync_replicas": 0, "max_sync_replicas": 0,
        "describe": "synchronous (any 1, dataDurability required)",
    }  # fmt: skip
    assert record["wal_on_data_volume"] is False
    members = record["members"]
    assert isinstance(members, list) and len(members) == 3


def test_no_synchronous_section_is_asynchronous_and_preferred_says_what_it_gives_up() -> None:
    small = disc.layout(load("cluster-async.json"), [], [])
    assert not small.sync.synchronous
    assert small.sync.describe().startswith("asynchronous")
    assert not small.wal_volume and disc.storage_classes(small) == {"data": None}
    cluster = load("cluster-pg.json")
    cluster["spec"]["postgresql"]["synchronous"]["dataDurability"] = "preferred"
    assert "stop waiting" in disc.sync_design(cluster).describe()
    legacy = load("cluster-async.json")
    legacy["spec"].update(minSyncReplicas=1, maxSyncReplicas=1)
    assert disc.sync_design(legacy).describe() == (
        "synchronous (minSyncReplicas 1, maxSyncReplicas 1)"
    )


def test_a_cluster_failing_over_is_not_ready_and_says_why() -> None:
    small = disc.layout(load("cluster-async.json"), [], [])
    assert disc.not_ready(small) == (
        "Cluster default/small is changing its primary (small-1 → small-2; phase: Failing over)"
    )
    with pytest.raises(UsageError, match="its primary 'small-1' has no pod"):
        small.primary()


def test_pods_of_other_clusters_poolers_and_jobs_are_not_instances() -> None:
    pods = items("pods-pg.json")
    pooler = copy.deepcopy(pods[0])
    pooler["metadata"]["name"] = "pg-pooler-abc"
    pooler["metadata"]["labels"]["cnpg.io/podRole"] = "pooler"
    other = copy.deepcopy(pods[1])
    other["metadata"]["labels"]["cnpg.io/cluster"] = "other"
    job = copy.deepcopy(pods[2])
    job["metadata"]["name"] = "pg-1-initdb-xyz"
    del job["metadata"]["labels"]["cnpg.io/instanceName"]
    found = disc.instances_of("pg", [*pods, pooler, other, job], [])
    assert [i.name for i in found] == ["pg-1", "pg-2", "pg-3"]


def test_the_deprecated_role_label_alone_still_names_the_role() -> None:
    assert disc.instance_role({"role": "replica"}) == "replica"
    assert disc.instance_role({"cnpg.io/instanceRole": "primary", "role": ""}) == "primary"
    assert disc.instance_role({}) == "unknown"


def test_an_object_that_is_not_a_cluster_is_refused() -> None:
    with pytest.raises(UsageError, match="not a CloudNativePG Cluster"):
        disc.layout({"apiVersion": "v1", "kind": "Pod"}, [], [])


def test_a_probe_takes_the_class_of_the_volumes_asked_never_a_guess() -> None:
    from howfast.targets.cnpg.probe import probe_class

    assert probe_class(pg(), "data") == "fast"
    assert probe_class(pg(), "wal") == "wal-class"
    small = disc.layout(load("cluster-async.json"), [], [])
    with pytest.raises(UsageError, match="has no WAL volume"):
        probe_class(small, "wal")
    with pytest.raises(UsageError, match="name no StorageClass"):
        probe_class(small, "data")
