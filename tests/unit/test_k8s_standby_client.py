"""The pure builders of a `k8s://` target's standby pods (targets/k8s/standby_manifests.py) and
client pod (targets/k8s/client_manifests.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from howfast.targets.k8s import client_manifests as cm
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s import network as net
from howfast.targets.k8s import standby_manifests as sm
from howfast.targets.k8s.spec import K8sOptions, parse_target
from tests.unit.k8s_shapes import model_problem, openapi_problems

OWNER = {"name": "howfast-abc123", "uid": "UID"}


def _run(text: str = "k8s://fast", **options: Any) -> m.Plan:
    return m.Plan(
        "abc123",
        "bench",
        parse_target(text),
        K8sOptions(**options),
        net.SERVER_PORT,
        settings={"shared_buffers": "128MB", "synchronous_standby_names": "FIRST 1 (standby_1)"},
    )


def _standby(
    mode: net.NetworkMode = "pod", text: str = "k8s://fast", **kwargs: Any
) -> sm.StandbyPlan:
    run = _run(text, pull_policy="Never", cpu="2", memory_bytes=2**30)
    primary = net.addresses(run.name, mode, 1, {"primary": 41000})["primary"]
    return sm.StandbyPlan(run, 1, mode, primary, host_port=41001, **kwargs)


def _conf(text: str) -> dict[str, str]:
    """A conf_text back into settings (the last value of a name wins, as in PostgreSQL)."""
    out = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            name, _, value = line.partition(" = ")
            out[name] = value.strip("'").replace("''", "'")
    return out


def test_a_standby_is_a_config_map_its_claims_and_a_pod_all_labelled_and_owned() -> None:
    plan = _standby(text="k8s://fast?wal=slow")
    objects = sm.objects(plan, OWNER)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ConfigMap", "howfast-abc123-standby-1"),
        ("PersistentVolumeClaim", "howfast-abc123-standby-1-data"),
        ("PersistentVolumeClaim", "howfast-abc123-standby-1-wal"),
        ("Pod", "howfast-abc123-standby-1"),
    ]
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels[m.MANAGED_BY] == "howfast" and labels[m.RUN_LABEL] == "abc123"  # cleanup
        assert labels[net.ROLE_LABEL] == "standby"
        assert obj["metadata"]["namespace"] == "bench"
        assert obj["metadata"]["ownerReferences"][0]["name"] == OWNER["name"]
    classes = [o["spec"]["storageClassName"] for o in objects[1:3]]
    assert classes == ["fast", "slow"]  # the primary's classes by default
    env = {e["name"]: e.get("value") for e in objects[-1]["spec"]["containers"][0]["env"]}
    assert env["HOWFAST_WALDIR"] == m.WAL_DIR


def test_standby_class_and_empty_dir() -> None:
    (claim,) = sm.claims(_standby(standby_class="other"), OWNER)
    assert claim["spec"]["storageClassName"] == "other"
    empty = _standby(text="k8s://emptyDir?medium=Memory")
    assert sm.claims(empty, OWNER) == []
    data = sm.pod(empty, OWNER)["spec"]["volumes"][0]
    assert data == {"name": "data", "emptyDir": {"sizeLimit": "10Gi", "medium": "Memory"}}


def test_the_standby_streams_from_the_primary_with_its_slot_and_no_password() -> None:
    plan = _standby()
    config = sm.config_map(plan, OWNER)["data"]
    assert config["standby.sh"] == sm.STANDBY_SCRIPT
    block = _conf(config["standby.conf"])
    assert block["primary_conninfo"] == (
        "host=primary.howfast-abc123 port=5432 user=howfast application_name=standby_1 "
        "passfile=/howfast/run/pgpass"
    )
    assert block["primary_slot_name"] == "standby_1"
    # the primary's synchronous_standby_names (a setting of the run) must not make a promoted
    # standby wait for itself: standby.conf comes last and clears it
    assert block["synchronous_standby_names"] == ""
    assert _conf(config["postgresql.conf"])["synchronous_standby_names"] == "FIRST 1 (standby_1)"
    assert block["listen_addresses"] == "*" and block["port"] == "5432"
    pod = sm.pod(plan, OWNER)
    server = pod["spec"]["containers"][0]
    assert server["command"] == ["/bin/sh", f"{m.CONFIG_MOUNT}/standby.sh"]
    env = {e["name"]: e for e in server["env"]}
    assert env["HOWFAST_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "howfast-abc123",
        "key": m.PASSWORD_KEY,
    }
    assert env["HOWFAST_PRIMARY"]["value"] == block["primary_conninfo"]
    assert env["HOWFAST_SLOT"]["value"] == "standby_1"
    # the password file is in the memory volume, not on the volume under test
    run_volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "run")
    assert run_volume["emptyDir"]["medium"] == "Memory"
    assert sm.PASSFILE.startswith(m.RUN_MOUNT + "/")
    # the builders are never given the password: the objects only name the Secret's key
    secret_refs = json.dumps(sm.objects(plan, OWNER)).count('"secretKeyRef"')
    assert secret_refs == 1


def test_a_standby_in_host_mode_dials_the_primarys_port_and_listens_on_its_own() -> None:
    plan = _standby("host")
    block = _conf(sm.config_map(plan, OWNER)["data"]["standby.conf"])
    assert "host=127.0.0.1 port=41000 " in block["primary_conninfo"]
    assert block["port"] == "41001" and block["listen_addresses"] == "127.0.0.1"
    probe = sm.pod(plan, OWNER)["spec"]["containers"][0]["readinessProbe"]
    assert probe["exec"]["command"][-1].endswith("-h 127.0.0.1 -p 41001 -U howfast")
    assert plan.address.text == "127.0.0.1:41001"
    assert _standby("pod").address.text == "standby-1.howfast-abc123:5432"


def test_the_standby_and_client_pods_keep_the_primarys_restricted_security() -> None:
    """The same securityContexts as the primary's pod (manifests.py), so they cannot drift."""
    primary = m.pod(_run(), OWNER)["spec"]
    for pod in (sm.pod(_standby(), OWNER), cm.client_pod(_run(), "pod", OWNER)):
        spec = pod["spec"]
        assert spec["securityContext"] == primary["securityContext"]
        assert spec["automountServiceAccountToken"] is False
        for container in spec["containers"]:
            assert container["securityContext"] == primary["containers"][0]["securityContext"]
        assert "hostNetwork" not in spec and "hostPID" not in spec and "hostIPC" not in spec


def test_standbys_prefer_other_nodes_than_the_runs_servers() -> None:
    spec = sm.pod(_standby(), OWNER)["spec"]
    (term,) = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    selector = term["podAffinityTerm"]["labelSelector"]["matchLabels"]
    assert selector == {m.RUN_LABEL: "abc123", net.SERVER_LABEL: "true"}
    assert spec["containers"][0]["resources"]["limits"] == {"cpu": "2", "memory": "1024Mi"}
    assert [c["name"] for c in spec["containers"]] == [m.POSTGRES, m.TOOLS]


def test_the_client_pod_holds_the_tools_only() -> None:
    pod = cm.client_pod(_run(pull_policy="Never"), "pod", OWNER)
    assert pod["metadata"]["name"] == "howfast-abc123-client"
    (tools,) = pod["spec"]["containers"]
    assert tools["name"] == m.TOOLS and tools["imagePullPolicy"] == "Never"
    assert tools["env"] == [
        {
            "name": "PGPASSWORD",
            "valueFrom": {"secretKeyRef": {"name": "howfast-abc123", "key": m.PASSWORD_KEY}},
        },
        # a connection to a server pod's vanished address gives up instead of hanging
        {"name": "PGCONNECT_TIMEOUT", "value": cm.CONNECT_TIMEOUT_S},
    ]
    assert pod["spec"]["volumes"] == [
        {"name": "work", "emptyDir": {"medium": "Memory", "sizeLimit": m.WORK_LIMIT}}
    ]
    labels = pod["metadata"]["labels"]
    assert labels[net.ROLE_LABEL] == "client" and net.SERVER_LABEL not in labels
    assert labels[m.RUN_LABEL] == "abc123" and labels[m.MANAGED_BY] == "howfast"


def test_client_node_pins_the_client_and_drained_nodes_are_excluded() -> None:
    free = cm.client_pod(_run(), "pod", OWNER)["spec"]["affinity"]
    (term,) = free["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == {
        m.RUN_LABEL: "abc123",
        net.ROLE_LABEL: "primary",
    }
    assert "nodeAffinity" not in free
    pinned = cm.client_pod(_run(), "host", OWNER, node="127.0.0.2", avoid=["localhost"])
    affinity = pinned["spec"]["affinity"]
    assert "podAntiAffinity" not in affinity
    required = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required["nodeSelectorTerms"][0]["matchFields"] == [
        {"key": "metadata.name", "operator": "In", "values": ["127.0.0.2"]},
        {"key": "metadata.name", "operator": "NotIn", "values": ["localhost"]},
    ]
    assert pinned["spec"]["hostNetwork"] is True
    with pytest.raises(ValueError, match="drain"):
        cm.client_pod(_run(), "pod", OWNER, node="n1", avoid=["n1"])


def test_client_connection_and_record() -> None:
    address = net.ServerAddress("primary.howfast-abc123", 5432)
    conn = cm.client_connection(address, "pw")
    assert conn.pgbench_args() == [
        "-h",
        "primary.howfast-abc123",
        "-p",
        "5432",
        "-U",
        "howfast",
        "postgres",
    ]
    assert conn.secret_env() == {"PGPASSWORD": "pw"}
    with pytest.raises(ValueError, match="PORT"):
        cm.client_connection(net.ServerAddress("127.0.0.1", "PORT"), "pw")
    record = cm.client_record(
        "pod",
        "host",
        net.ServerAddress("127.0.0.1", 41000),
        node="127.0.0.2",
        server_node="localhost",
    )
    assert record == {
        "placement": "pod",
        "node": "127.0.0.2",
        "server_node": "localhost",
        "same_node": False,
        "address": "127.0.0.1:41000",
        "network": "host (lab)",
    }
    unknown = cm.client_record("pod", "pod", address, node="n1", server_node=None)
    assert unknown["same_node"] is None and unknown["network"] == "pod"
    inside = cm.client_record("same-pod", "pod", address, node="n1", server_node="n1")
    assert inside["same_node"] is True and inside["network"] == "loopback in the server's pod"


def test_planned_descriptions_name_the_pods_and_their_containers() -> None:
    standby = sm.planned_pod(_standby())
    assert (standby.pod, standby.server_container, standby.tools_container) == (
        "howfast-abc123-standby-1",
        m.POSTGRES,
        m.TOOLS,
    )
    assert standby.memory_limit_bytes == 2**30 and standby.data_dir == m.PGDATA
    client = cm.planned_client_pod(_run())
    assert (client.pod, client.server_container) == ("howfast-abc123-client", None)
    assert client.work_dir == m.WORK_MOUNT


def test_conninfo_values_are_quoted_when_needed() -> None:
    assert sm.libpq_value("primary.x") == "primary.x"
    assert sm.libpq_value("a b") == "'a b'"
    assert sm.libpq_value("it's\\") == "'it\\'s\\\\'"
    assert sm.libpq_value("") == "''"


@pytest.mark.parametrize("mode", ["pod", "host"])
@pytest.mark.parametrize("text", ["k8s://fast?wal=slow", "k8s://emptyDir"])
def test_every_standby_and_client_object_fits_the_kubernetes_api(
    mode: net.NetworkMode, text: str
) -> None:
    plan = _standby(mode, text)
    objects = [*sm.objects(plan, OWNER), cm.client_pod(plan.run, mode, OWNER, node="n2")]
    for obj in objects:
        assert model_problem(obj) is None, (obj["kind"], model_problem(obj))
        problems = openapi_problems(obj)
        assert not problems, (obj["kind"], problems)  # None: the lab's document is not here
