"""The k8s lab's pod network as data (tests/k8s/lab/podnet.py, coredns.py, config.py): every
address in 198.18.0.0/15 and none in a private range, no default route and no masquerading
for pods, the safety rules, and a CoreDNS that forwards nothing. The lab itself is tested
in tests/k8s/test_network.py."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

from tests.k8s.lab import config, coredns, podnet
from tests.k8s.lab.config import Paths

LAB = ipaddress.IPv4Network("198.18.0.0/15")
PRIVATE = [ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]


def _nodes() -> list[config.NodeSpec]:
    paths = Paths(Path("/nonexistent/lab"))
    return [paths.node(1), paths.node(2)]


def test_every_address_of_the_lab_is_in_the_benchmark_range() -> None:
    addresses = [config.API_ADDRESS, config.KUBERNETES_SERVICE_IP, config.DNS_SERVICE_IP]
    networks = [config.CLUSTER_CIDR, config.SERVICE_CIDR, config.LAB_RANGE]
    networks += [node.subnet for node in _nodes()]
    addresses += [node.gateway for node in _nodes()]
    for net in map(ipaddress.IPv4Network, networks):
        assert net.subnet_of(LAB), net
        assert not any(net.overlaps(p) for p in PRIVATE), net
    for addr in map(ipaddress.ip_address, addresses):
        assert addr in LAB and not any(addr in p for p in PRIVATE), addr
    first, second = _nodes()
    assert not ipaddress.ip_network(first.subnet).overlaps(ipaddress.ip_network(second.subnet))
    assert first.gateway == config.API_ADDRESS  # pods reach the API server at their gateway
    assert ipaddress.ip_address(config.KUBERNETES_SERVICE_IP) in ipaddress.ip_network(
        config.SERVICE_CIDR
    )


def test_a_pod_gets_its_node_subnet_one_route_and_no_masquerading() -> None:
    for node in _nodes():
        doc = json.loads(podnet.cni_conflist(node, Path("/leases")))
        (bridge,) = doc["plugins"]
        assert bridge["type"] == "bridge" and bridge["bridge"] == node.bridge
        assert bridge["ipMasq"] is False
        assert bridge["ipam"]["ranges"] == [[{"subnet": node.subnet, "gateway": node.gateway}]]
        # no default route: only the lab's range, via the gateway
        assert bridge["ipam"]["routes"] == [{"dst": config.LAB_RANGE}]


def test_forwarding_between_a_bridge_and_anything_else_is_dropped() -> None:
    forwarding_host = podnet.forward_rules(forwarded_before=True)
    assert forwarding_host[0] == ["-i", "hflab-br+", "-o", "hflab-br+", "-j", "RETURN"]
    assert ["-i", "hflab-br+", "-j", "DROP"] in forwarding_host
    assert ["-o", "hflab-br+", "-j", "DROP"] in forwarding_host
    assert ["-j", "DROP"] not in forwarding_host  # the host's own forwarding is left alone
    # a host that forwarded nothing before `up` forwards nothing but the lab's now
    assert podnet.forward_rules(forwarded_before=False)[-1] == ["-j", "DROP"]
    post = podnet.postrouting_rules()
    assert post[-2:] == [
        ["-s", config.LAB_RANGE, "-j", "DROP"],
        ["-d", config.LAB_RANGE, "-j", "DROP"],
    ]
    # made in the mangle table: before the filter table, where kube-proxy's ACCEPTs are
    assert {c["table"] for c in podnet.chains(False)} == {"mangle"}
    assert podnet.routes(_nodes())[0] == ["blackhole", config.LAB_RANGE]


def test_coredns_answers_the_cluster_zones_only_and_forwards_nothing() -> None:
    corefile = coredns.corefile()
    assert "forward" not in corefile and "cache" not in corefile
    assert corefile.startswith(f"{config.CLUSTER_DOMAIN}:{coredns.LISTEN_PORT} ")
    assert "plugin/forward" not in coredns.main_go()
    items = coredns.objects()["items"]
    service = next(i for i in items if i["kind"] == "Service")
    assert service["spec"]["clusterIP"] == config.DNS_SERVICE_IP
    daemonset = next(i for i in items if i["kind"] == "DaemonSet")
    container = daemonset["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
