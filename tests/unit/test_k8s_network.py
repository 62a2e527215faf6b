"""The Kubernetes network modes (targets/k8s/network.py): addresses, the headless Service and
NetworkPolicy of a real cluster, the lab-only host network, and what each server accepts."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from howfast.errors import UsageError
from howfast.targets.k8s import client_manifests as cm
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s import network as net
from howfast.targets.k8s import standby_manifests as sm
from howfast.targets.k8s.spec import K8sOptions, parse_target
from tests.unit.k8s_shapes import model_problem, openapi_problems

OWNER = {"name": "howfast-abc123", "uid": "UID"}


def _run(text: str = "k8s://fast") -> m.Plan:
    return m.Plan("abc123", "bench", parse_target(text), K8sOptions(), net.SERVER_PORT)


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_the_mode_comes_from_the_environment_and_a_wrong_value_is_refused() -> None:
    assert net.network_mode({}) == "pod"
    assert net.network_mode({net.NETWORK_ENV: ""}) == "pod"
    assert net.network_mode({net.NETWORK_ENV: "host"}) == "host"
    with pytest.raises(UsageError, match="HOWFAST_K8S_NETWORK='hostnet'"):
        net.network_mode({net.NETWORK_ENV: "hostnet"})


def test_host_mode_is_refused_where_the_namespace_enforces_baseline_or_restricted() -> None:
    for level in ("baseline", "restricted"):
        reason = net.pod_security_refusal("host", "bench", {net.ENFORCE_LABEL: level})
        assert reason is not None
        assert f"{net.ENFORCE_LABEL}={level}" in reason and "namespace bench" in reason
    assert net.pod_security_refusal("host", "bench", {net.ENFORCE_LABEL: "privileged"}) is None
    assert net.pod_security_refusal("host", "bench", {}) is None
    assert net.pod_security_refusal("pod", "bench", {net.ENFORCE_LABEL: "restricted"}) is None


def test_addresses_by_mode() -> None:
    pod = net.addresses("howfast-abc123", "pod", 2)
    assert {k: a.text for k, a in pod.items()} == {
        "primary": "primary.howfast-abc123:5432",
        "standby-1": "standby-1.howfast-abc123:5432",
        "standby-2": "standby-2.howfast-abc123:5432",
    }
    ports = {"primary": 41000, "standby-1": 41001}
    host = net.addresses("howfast-abc123", "host", 1, ports)
    assert {k: a.text for k, a in host.items()} == {
        "primary": "127.0.0.1:41000",
        "standby-1": "127.0.0.1:41001",
    }
    dry = net.addresses("howfast-abc123", "host", 1)  # ports are chosen at start
    assert [a.port for a in dry.values()] == ["PORT", "PORT_STANDBY_1"]


def test_servers_listen_beyond_loopback_only_in_pod_mode_with_remote_clients() -> None:
    assert net.listen_settings("pod", 5432, remote_clients=True)["listen_addresses"] == "*"
    assert net.listen_settings("pod", 5432, remote_clients=False)["listen_addresses"] == "127.0.0.1"
    host = net.listen_settings("host", 41000, remote_clients=True)
    assert host["listen_addresses"] == "127.0.0.1" and host["port"] == "41000"
    assert host["hba_file"] == f"{m.CONFIG_MOUNT}/{net.HBA_KEY}"


def test_pg_hba_asks_the_password_over_tcp_and_opens_other_addresses_only_in_pod_mode() -> None:
    remote = net.hba_text("pod", remote_clients=True).splitlines()
    assert "host all howfast all scram-sha-256" in remote
    assert "host replication howfast all scram-sha-256" in remote
    lab = net.hba_text("host", remote_clients=True).splitlines()
    assert not any(" all scram" in line for line in lab)  # 127.0.0.1 and ::1 only
    assert "host replication howfast 127.0.0.1/32 scram-sha-256" in lab
    for line in remote + lab:
        if line.startswith("host"):
            assert line.endswith("scram-sha-256")  # never trust over TCP


def _pods(mode: net.NetworkMode) -> dict[str, dict[str, Any]]:
    run = _run()
    primary_address = net.addresses(run.name, mode, 1, {"primary": 41000})["primary"]
    standby = sm.StandbyPlan(run, 1, mode, primary_address, host_port=41001)
    return {
        # manifests.pod places it when other pods dial it
        "primary": m.pod(replace(run, network=mode, remote_clients=True), OWNER),
        "standby": sm.pod(standby, OWNER),
        "client": cm.client_pod(run, mode, OWNER),
    }


def test_the_service_names_the_servers_and_the_policy_admits_the_runs_pods_only() -> None:
    service, policy = net.network_objects("abc123", "bench", "pod", OWNER)
    pods = _pods("pod")
    labels = {role: pod["metadata"]["labels"] for role, pod in pods.items()}
    # DNS: <hostname>.<subdomain> needs a headless Service named as the subdomain that
    # selects the pod
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    for role in ("primary", "standby"):
        assert pods[role]["spec"]["subdomain"] == service["metadata"]["name"]
        assert _matches(service["spec"]["selector"], labels[role])
        assert _matches(policy["spec"]["podSelector"]["matchLabels"], labels[role])
    assert pods["primary"]["spec"]["hostname"] == "primary"
    assert pods["standby"]["spec"]["hostname"] == "standby-1"
    assert not _matches(service["spec"]["selector"], labels["client"])
    (rule,) = policy["spec"]["ingress"]
    (source,) = rule["from"]
    for role in ("client", "standby"):
        assert _matches(source["podSelector"]["matchLabels"], labels[role])
    assert not _matches(source["podSelector"]["matchLabels"], {m.RUN_LABEL: "other-run"})
    assert "ports" not in rule  # the primary's port is the run's: any port of the servers
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    for obj in (service, policy):  # found by cleanup, removed with the owner
        assert _matches(m.labels("abc123"), obj["metadata"]["labels"])
        assert obj["metadata"]["ownerReferences"][0]["name"] == OWNER["name"]


def test_host_mode_has_no_network_objects_and_puts_every_pod_on_the_nodes_network() -> None:
    assert net.network_objects("abc123", "bench", "host", OWNER) == []
    for role, pod in _pods("host").items():
        spec = pod["spec"]
        assert spec["hostNetwork"] is True, role
        assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
        assert "hostname" not in spec and "subdomain" not in spec


def test_pod_mode_keeps_every_pod_off_the_host_network() -> None:
    for role, pod in _pods("pod").items():
        assert "hostNetwork" not in pod["spec"], role
        assert pod["metadata"]["labels"][net.ROLE_LABEL] == role
        assert (net.SERVER_LABEL in pod["metadata"]["labels"]) == (role != "client")


def test_place_pod_copies_and_needs_a_servers_hostname() -> None:
    original = m.pod(replace(_run(), server=False), OWNER)  # a probe's pod: not placed
    placed = net.place_pod(original, "host", "primary")
    assert "hostNetwork" not in original["spec"] and placed["spec"]["hostNetwork"] is True
    assert net.ROLE_LABEL not in original["metadata"]["labels"]
    with pytest.raises(ValueError, match="hostname"):
        net.place_pod(original, "pod", "primary")


@pytest.mark.parametrize("mode", ["pod", "host"])
def test_every_network_object_and_placed_pod_fits_the_kubernetes_api(mode: net.NetworkMode) -> None:
    objects = [*net.network_objects("abc123", "bench", mode, OWNER), *_pods(mode).values()]
    for obj in objects:
        assert model_problem(obj) is None, (obj["kind"], model_problem(obj))
        problems = openapi_problems(obj)
        assert not problems, (obj["kind"], problems)  # None: the lab's document is not here


def test_the_shape_checks_catch_mistakes() -> None:
    """The checks above would fail on a misspelt field, a wrong type, a missing field."""
    service = net.headless_service("abc123", "bench", OWNER)
    service["spec"]["publishNotReadyAdresses"] = True
    assert "publishNotReadyAdresses" in (model_problem(service) or "")
    policy = net.network_policy("abc123", "bench", OWNER)
    policy["spec"]["ingress"][0]["from"][0]["podSelector"] = 6
    assert model_problem(policy) is not None
    pod = _pods("pod")["client"]
    del pod["spec"]["containers"][0]["name"]
    assert model_problem(pod) is not None
    problems = openapi_problems(pod)
    if problems is not None:
        assert any("missing required field 'name'" in p for p in problems)
        twice = _pods("pod")["standby"]
        twice["spec"]["volumes"].append(dict(twice["spec"]["volumes"][0]))
        assert any("duplicate name" in p for p in openapi_problems(twice) or [])


def test_node_affinity() -> None:
    assert net.required_node(None) is None
    required = net.required_node("n1", ["n2"])
    assert required is not None
    (term,) = required["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchFields"] == [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]},
        {"key": "metadata.name", "operator": "NotIn", "values": ["n2"]},
    ]
