"""Where the client pod goes (never beside the primary unless asked) and what it is: the
cluster's image, the password by reference to the cluster's secret. HAND-MADE objects
(tests/data/cnpg/handmade/)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from howfast.errors import UsageError
from howfast.targets.cnpg import client as c
from howfast.targets.cnpg import discovery as disc
from tests.unit.cnpg_objects import items, load


def pg() -> disc.ClusterLayout:
    return disc.layout(load("cluster-pg.json"), items("pods-pg.json"), items("pvcs-pg.json"))


def test_a_node_without_an_instance_first() -> None:
    chosen = c.choose_client_node(pg(), ["n1", "n2", "n3", "n5", "n4"], None)
    assert chosen == c.ClientNode("n4", "a node with no instance of the cluster")


def test_when_every_node_holds_an_instance_a_standby_s_never_the_primary_s() -> None:
    chosen = c.choose_client_node(pg(), ["n1", "n2", "n3"], None)
    assert (chosen.node, chosen.beside) == ("n2", "pg-2")
    assert "never the primary's node" in chosen.why
    with pytest.raises(UsageError, match="every schedulable node is the primary's"):
        c.choose_client_node(pg(), ["n1"], None)


def test_a_node_asked_wins_and_beside_the_primary_is_said() -> None:
    chosen = c.choose_client_node(pg(), ["n1", "n4"], "n1")
    assert chosen.node == "n1" and "beside the primary pg-1" in chosen.why
    with pytest.raises(UsageError, match="--client-node n9: not a schedulable node"):
        c.choose_client_node(pg(), ["n1"], "n9")


def node(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_schedulable_nodes_are_ready_uncordoned_and_untainted() -> None:
    not_ready = node("d")
    not_ready["status"]["conditions"][0]["status"] = "False"
    nodes = [
        node("b"), node("a"), node("c", unschedulable=True), not_ready,
        node("e", taints=[{"key": "node-role.kubernetes.io/control-plane",
                           "effect": "NoSchedule"}]),
        node("f", taints=[{"key": "x", "effect": "PreferNoSchedule"}]),
    ]  # fmt: skip
    assert c.schedulable(nodes) == ["a", "b", "f"]


def test_the_client_pod_runs_the_cluster_s_image_as_its_user_with_no_password_in_it() -> None:
    layout = pg()
    cluster = load("cluster-pg.json")
    cluster["spec"]["postgresUID"] = 1001
    plan = c.client_plan(cluster, layout, token="1a2b3c4d", secret="pg-superuser", node="n4")
    pod = c.client_pod(plan, {"name": "howfast-1a2b3c4d", "uid": "u"})
    assert pod["metadata"]["name"] == "howfast-1a2b3c4d-client"
    assert pod["metadata"]["labels"]["howfast.dev/run"] == "1a2b3c4d"
    tools = pod["spec"]["containers"][0]
    assert tools["image"] == "ghcr.io/cloudnative-pg/postgresql:17.5"
    assert tools["env"] == [{"name": "PGPASSWORD", "valueFrom": {
        "secretKeyRef": {"name": "pg-superuser", "key": "password"}}}]  # fmt: skip
    assert pod["spec"]["securityContext"]["runAsUser"] == 1001
    assert pod["spec"]["securityContext"]["runAsGroup"] == 26
    affinity = pod["spec"]["affinity"]["nodeAffinity"]
    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n4"]
    assert "password" not in json.dumps(c.owner_secret("1a2b3c4d", "lab", "cnpg://lab/pg", ""))
    assert c.rw_address(layout) == "pg-rw.lab.svc"
    description = c.client_description(plan)
    assert description.server_container is None and description.pod == "howfast-1a2b3c4d-client"


def test_the_client_pod_pulls_its_image_as_the_cluster_s_pods_do_unless_the_run_says() -> None:
    cluster = load("cluster-pg.json")
    cluster["spec"]["imagePullPolicy"] = "Never"
    plan = c.client_plan(cluster, pg(), token="1a2b3c4d", secret="s", node=None)
    assert c.client_pod(plan, None)["spec"]["containers"][0]["imagePullPolicy"] == "Never"
    plan = c.client_plan(cluster, pg(), token="1a2b3c4d", secret="s", node=None,
                         pull_policy="Always")  # fmt: skip
    assert c.client_pod(plan, None)["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    assert "affinity" not in c.client_pod(plan, None)["spec"]  # no node: the scheduler's


def test_an_instance_s_wal_is_on_its_wal_volume_when_its_pod_mounts_one() -> None:
    from pathlib import Path

    from howfast.samplers.instances import prefixed
    from howfast.targets.cnpg.pods import instance_paths

    pod = items("pods-pg.json")[0]
    assert instance_paths(pod) == {
        "data": Path("/var/lib/postgresql/data/pgdata"),
        "wal": Path("/var/lib/postgresql/wal/pg_wal"),
    }
    pod["spec"]["containers"][0]["volumeMounts"] = pod["spec"]["containers"][0]["volumeMounts"][:1]
    assert instance_paths(pod)["wal"] == Path("/var/lib/postgresql/data/pgdata/pg_wal")
    assert list(prefixed("pg-1", {"pgio.wal.write_mbps": []})) == [
        "instances.pg-1.pgio.wal.write_mbps"
    ]
