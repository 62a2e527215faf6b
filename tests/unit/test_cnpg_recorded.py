"""cnpg:// parsers on objects RECORDED from the real CloudNativePG 1.27.1 operator
(tests/data/cnpg/v1.27.1/: a 2-instance Cluster lab/pg, asynchronous, no WAL volume, no
superuser secret) healthy, right after its primary's pod was deleted, and healthy again.
What no recording covers (3 instances, a WAL volume, synchronous settings, superuser access)
stays on the hand-made objects (tests/data/cnpg/handmade/README.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from howfast.targets.cnpg import credentials as cr
from howfast.targets.cnpg import discovery as disc
from howfast.targets.cnpg import timeline as tl

RECORDED = Path(__file__).resolve().parents[1] / "data" / "cnpg" / "v1.27.1"


def load(state: str, name: str) -> Any:
    return json.loads((RECORDED / state / name).read_text())


def items(state: str, name: str) -> list[dict[str, Any]]:
    return list(load(state, name)["items"])


def layout(state: str) -> disc.ClusterLayout:
    return disc.layout(
        load(state, "cluster.json"), items(state, "pods.json"), items(state, "pvcs.json")
    )


def test_a_healthy_cluster_s_primary_standby_nodes_and_volumes() -> None:
    pg = layout("healthy")
    assert (pg.namespace, pg.name, pg.instances_wanted) == ("lab", "pg", 2)
    assert pg.primary().name == "pg-1" and pg.primary().role == "primary"
    assert [i.name for i in pg.standbys()] == ["pg-2"]
    assert pg.nodes() == ("127.0.0.2", "localhost")  # one instance on each lab node
    standby = pg.instance("pg-2")
    assert standby is not None and standby.ready and standby.metrics_port == 9187
    assert standby.data is not None and standby.wal is None  # no walStorage: WAL in PGDATA
    assert (standby.data.claim, standby.data.storage_class, standby.data.size) == (
        "pg-2", "lab-disk", "1Gi",
    )  # fmt: skip
    assert disc.storage_classes(pg) == {"data": "lab-disk"}
    assert disc.not_ready(pg) is None
    record = pg.design_record()
    assert record["wal_on_data_volume"] is True and record["image"] == "localhost/pgfio:15"


def test_the_operator_s_default_is_an_asynchronous_standby() -> None:
    sync = layout("healthy").sync
    assert not sync.synchronous and sync.describe().startswith("asynchronous")


def test_right_after_the_failover_the_new_primary_is_named_and_the_cluster_not_ready() -> None:
    promoted = layout("promoted")
    assert promoted.current_primary == "pg-2" == promoted.target_primary
    assert promoted.phase == "Waiting for the instances to become active"
    old = promoted.instance("pg-1")
    assert old is not None and not old.ready and promoted.primary().ready
    assert disc.not_ready(promoted) is None  # the new primary serves: a run may start
    again = layout("healthy-after-failover")
    assert again.primary().name == "pg-2" and [i.name for i in again.standbys()] == ["pg-1"]
    assert disc.not_ready(again) is None


def test_the_rw_service_follows_the_primary_in_its_endpoint_slices() -> None:
    def rw(state: str) -> tuple[str, ...]:
        slices = items(state, "endpointslices.json")
        ours = [s for s in slices if s["metadata"]["labels"].get(
            "kubernetes.io/service-name") == "pg-rw"]  # fmt: skip
        return tl.endpoint_pods(ours)

    assert rw("healthy") == ("pg-1",)
    assert rw("promoted") == ("pg-2",)
    r_slices = [s for s in items("promoted", "endpointslices.json")
                if s["metadata"]["name"].startswith("pg-r-")]  # fmt: skip
    assert tl.endpoint_pods(r_slices) == ("pg-2",)  # pg-1, not ready, is left out


def test_the_cluster_s_events_say_the_failover() -> None:
    lines = tl.event_lines(items("promoted", "events.json"), since_epoch=0.0)
    reasons = [line["reason"] for line in lines if isinstance(line, dict)]
    assert reasons[-2:] == ["FailingOver", "FailoverTarget"]
    last = lines[-1]
    assert isinstance(last, dict) and last["message"] == "Failing over from pg-1 to pg-2"


def test_the_app_secret_is_the_one_used_and_there_is_no_superuser_secret() -> None:
    cluster = load("healthy", "cluster.json")
    assert cr.superuser_secret(cluster) is None  # enableSuperuserAccess: false by default
    chosen = cr.choose_secret(cluster, "auto")
    assert (chosen.name, chosen.role) == ("pg-app", "app")
    names = [s["metadata"]["name"] for s in items("healthy", "secrets.json")]
    assert names == ["pg-app", "pg-ca", "pg-replication", "pg-server"]
    (secret,) = [s for s in items("healthy", "secrets.json") if s["metadata"]["name"] == "pg-app"]
    found = cr.published(secret)  # values replaced by "placeholder" in the recording
    assert found.user == "placeholder" and found.password == "placeholder"
    assert cr.application_databases(cluster) == ("app", "postgres", "template0", "template1")
