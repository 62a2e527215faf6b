"""The lab's pod network (tests/k8s/lab/podnet.py, README "The network"): a pod reaches another
pod (on the other node too), a ClusterIP Service, a DNS name and the API server through the
`kubernetes` Service; it has no default route; and no packet of all that leaves the machine.

"Leaves the machine" is checked two ways while the pods talk: every frame sent by a host
interface other than lo and the lab's own (its bridges and the pods' veths) is captured
(AF_PACKET) and none may carry a lab address or the test's marker (exact: the kernel reports
capture drops, which must be 0); and those interfaces' TX packet counters, against a quiet
window just before, must not grow by anything like the lab traffic sent meanwhile."""

from __future__ import annotations

import errno
import ipaddress
import json
import secrets
import socket
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.k8s.conftest import Kube, TwoNodes
from tests.k8s.lab import podnet
from tests.k8s.lab.cluster import ClusterFacts
from tests.k8s.objects import wait_for

pytestmark = pytest.mark.k8s

LAB = ipaddress.ip_network("198.18.0.0/15")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
PORT = 8080
# datagrams the client sends to each of three destinations: far more than the host's own
# background traffic in the same few seconds, so a leak would show in the TX counters too
DATAGRAMS = 4000
ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_STATISTICS = 6
PACKET_OUTGOING = 4

SERVER = """import http.server, socketserver
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from the server pod"
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer(("0.0.0.0", 8080), H).serve_forever()
"""


def _pod(name: str, ns: str, facts: ClusterFacts, node: str, command: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "terminationGracePeriodSeconds": 1,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": facts.pg_uid,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "main",
                    "image": facts.pg_image,
                    "imagePullPolicy": "Never",
                    "command": command,
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


def _service(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": PORT, "targetPort": PORT}]},
    }


@dataclass
class Capture:
    """Frames sent by the host's non-lab interfaces while it runs (one AF_PACKET socket per
    interface, so the lab's own heavy bridge traffic never fills its buffers)."""

    marker: bytes
    interfaces: list[str]
    frames: int = 0
    leaked: list[str] = field(default_factory=list)
    outgoing_only: bool = True
    drops: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for name in self.interfaces:
            if not _is_up(name):
                continue  # an interface that is down sends nothing (its TX counter is watched)
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
            sock.bind((name, 0))
            sock.settimeout(0.2)
            thread = threading.Thread(target=self._read, args=(sock, name), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _read(self, sock: socket.socket, name: str) -> None:
        """Frames of the interface `name` (named as bound: the name recvfrom gives is looked
        up again by index, and is not that of an interface deleted meanwhile)."""
        with sock:
            while not self._stop.is_set():
                try:
                    frame, addr = sock.recvfrom(65535)
                except TimeoutError:
                    continue
                except OSError as exc:  # the interface went down: it sends no more
                    if exc.errno != errno.ENETDOWN:
                        self.leaked.append(f"capture stopped: {exc}")
                    break
                if addr[2] == PACKET_OUTGOING or not self.outgoing_only:
                    self.frames += 1
                    why = _lab_frame(frame, self.marker)
                    if why:
                        self.leaked.append(f"{name}: {why}")
            _received, tp_drops = struct.unpack(
                "II", sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
            )
            self.drops += tp_drops

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)


def _lab_frame(frame: bytes, marker: bytes) -> str | None:
    """Why an Ethernet frame is the lab's: a lab IPv4 address, an ARP for one, the marker."""
    if marker in frame:
        return "the test's marker in the payload"
    ethertype = int.from_bytes(frame[12:14], "big")
    if ethertype == 0x0800 and len(frame) >= 34:
        source, destination = ipaddress.ip_address(frame[26:30]), ipaddress.ip_address(frame[30:34])
        if source in LAB or destination in LAB:
            return f"IPv4 {_ipv4_summary(frame, source, destination)}"
    if ethertype == 0x0806 and len(frame) >= 42:
        for raw in (frame[28:32], frame[38:42]):
            if ipaddress.ip_address(raw) in LAB:
                return f"ARP for {ipaddress.ip_address(raw)}"
    return None


def _ipv4_summary(frame: bytes, source: IPAddress, destination: IPAddress) -> str:
    """An IPv4 frame's protocol, addresses and ports, and its first bytes: what a leak was."""
    header = (frame[14] & 0x0F) * 4
    protocol = {1: "ICMP", 6: "TCP", 17: "UDP"}.get(frame[23], f"protocol {frame[23]}")
    ports = frame[14 + header : 14 + header + 4]
    if protocol in ("TCP", "UDP") and len(ports) == 4:
        sport, dport = int.from_bytes(ports[:2], "big"), int.from_bytes(ports[2:], "big")
        where = f"{source}:{sport} -> {destination}:{dport}"
    else:
        where = f"{source} -> {destination}"
    return f"{protocol} {where}, {len(frame)} bytes, from {frame[:64].hex()}"


def _packet_filter_and_routes() -> str:
    """The lab's safety nets as they are now (for a leak's report: were they in place?)."""
    commands = (["iptables", "-w", "-t", "mangle", "-S"], ["ip", "route", "show", "table", "all"])
    return "\n".join(
        subprocess.run(argv, capture_output=True, text=True, check=False).stdout
        for argv in commands
    )


def _is_up(name: str) -> bool:
    flags = int(Path(f"/sys/class/net/{name}/flags").read_text(), 16)
    return bool(flags & 0x1)  # IFF_UP


def _is_veth(name: str) -> bool:
    """One end of a veth pair (its iflink is its peer's index, not its own): a link between
    two network namespaces of this machine, which no frame leaves the machine through."""
    dev = Path("/sys/class/net") / name
    try:
        peer, own = (dev / "iflink").read_text().strip(), (dev / "ifindex").read_text().strip()
    except OSError:
        return False
    return name.startswith("veth") and peer != own


def _outside_interfaces() -> list[str]:
    """Every interface but lo and the lab's, and but veths: a pod's host-side veth is made
    before its bridge takes it, and let go of before it is deleted, so one of another test's
    pods (in the other lane, tests/k8s/lanes.py) may be on no lab bridge just then."""
    lab = set(podnet.lab_interfaces())
    return sorted(
        p.name
        for p in Path("/sys/class/net").iterdir()
        if p.name not in {"lo", *lab} and not _is_veth(p.name)
    )


def _tx_packets(interfaces: list[str]) -> int:
    return sum(
        int(Path(f"/sys/class/net/{n}/statistics/tx_packets").read_text()) for n in interfaces
    )


@pytest.fixture
def pods(kube: Kube, k8s_lab: ClusterFacts, two_nodes: TwoNodes) -> Iterator[dict[str, Any]]:
    """A web server pod on the second node behind Service `web`, a client pod on the first."""
    ns = f"lab-net-{uuid.uuid4().hex[:6]}"
    kube("create", "namespace", ns)
    try:
        kube.apply(_pod("web", ns, k8s_lab, two_nodes.second, ["python3", "-c", SERVER]))
        kube.apply(_pod("client", ns, k8s_lab, two_nodes.first, ["sleep", "3600"]))
        kube.apply(_service(ns))
        for name in ("web", "client"):
            kube("wait", "--for=condition=Ready", f"pod/{name}", "-n", ns, "--timeout=120s")
        web = kube.get("pod", "web", "-n", ns)
        client = kube.get("pod", "client", "-n", ns)
        service = kube.get("service", "web", "-n", ns)

        def endpoints() -> bool:
            slices = kube.get("endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=web")
            return any(s.get("endpoints") for s in slices["items"])

        wait_for("the web Service's endpoints", endpoints)
        yield {
            "ns": ns,
            "web_ip": web["status"]["podIP"],
            "client_ip": client["status"]["podIP"],
            "cluster_ip": service["spec"]["clusterIP"],
        }
    finally:
        kube("delete", "namespace", ns, "--wait=false")


def _in_pod(kube: Kube, ns: str, script: str, timeout: float = 60) -> Any:
    """Run a Python script in the client pod; it prints one JSON document."""
    out = kube("exec", "-n", ns, "client", "--", "python3", "-c", script, timeout=timeout)
    return json.loads(out.stdout)


PROBE = """import json, socket, urllib.request
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode()
    except Exception as e:
        return f"error: {e}"
def resolve(name):
    try:
        return sorted({a[4][0] for a in socket.getaddrinfo(name, None, socket.AF_INET)})
    except Exception as e:
        return f"error: {e}"
routes = [l.split() for l in open("/proc/net/route").read().splitlines()[1:]]
print(json.dumps({
    "pod": get("http://WEB_IP:8080/"),
    "cluster_ip": get("http://CLUSTER_IP:8080/"),
    "dns_short": get("http://web.NS.svc:8080/"),
    "dns_full": get("http://web.NS.svc.cluster.local:8080/"),
    "resolved": resolve("web.NS.svc"),
    "outside_name": resolve("MARKER.example.com"),
    "routes": [(r[0], r[1], r[2]) for r in routes],
    "resolv_conf": open("/etc/resolv.conf").read(),
}))
"""

API = """import json, os, ssl, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
ctx = ssl.create_default_context(cafile=f"{sa}/ca.crt")
token = open(f"{sa}/token").read()
out = {}
for host in (os.environ["KUBERNETES_SERVICE_HOST"], "kubernetes.default.svc"):
    req = urllib.request.Request(f"https://{host}/version",
                                 headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            out[host] = json.loads(r.read())["gitVersion"]
    except Exception as e:
        out[host] = f"error: {e}"
print(json.dumps(out))
"""

BLAST = """import json, socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sent = 0
for dest in ("WEB_IP", "CLUSTER_IP", "GATEWAY"):
    for _ in range(COUNT):
        s.sendto(b"MARKER" * 8, (dest, 9))
        sent += 1
fails = {}
for dest in ("192.0.2.1", "1.1.1.1"):
    try:
        s.sendto(b"MARKER", (dest, 9))
        fails[dest] = "sent"
    except OSError as e:
        fails[dest] = e.strerror
print(json.dumps({"sent": sent, "outside": fails}))
"""


def _fill(script: str, **values: str) -> str:
    for key, value in values.items():
        script = script.replace(key, value)
    return script


def test_pods_reach_pods_services_dns_and_the_api_server_and_nothing_leaves(
    kube: Kube, k8s_lab: ClusterFacts, two_nodes: TwoNodes, pods: dict[str, Any]
) -> None:
    ns, marker = pods["ns"], f"hflab{secrets.token_hex(6)}"
    subnets = {node: ipaddress.ip_network(net) for node, net in k8s_lab.node_subnets.items()}
    assert ipaddress.ip_address(pods["client_ip"]) in subnets[two_nodes.first]
    assert ipaddress.ip_address(pods["web_ip"]) in subnets[two_nodes.second]
    assert ipaddress.ip_address(pods["cluster_ip"]) in ipaddress.ip_network(k8s_lab.service_cidr)
    outside = _outside_interfaces()
    assert outside, "no non-loopback interface to watch"
    capture = Capture(marker.encode(), outside)
    capture.start()
    # The control: the same capture on the client's bridge must see the lab's frames, or
    # finding none outside would prove nothing.
    control = Capture(marker.encode(), [k8s_lab.node_bridges[two_nodes.first]], outgoing_only=False)
    control.start()
    try:
        # a quiet window of the host's own traffic, then the same length with the lab's
        quiet_start = _tx_packets(outside)
        time.sleep(3)
        quiet = _tx_packets(outside) - quiet_start
        busy_start, t0 = _tx_packets(outside), time.monotonic()
        values = {"WEB_IP": pods["web_ip"], "CLUSTER_IP": pods["cluster_ip"], "NS": ns}
        probe = _in_pod(kube, ns, _fill(PROBE, MARKER=marker, **values))
        api = _in_pod(kube, ns, API)
        gateway = str(next(subnets[two_nodes.first].hosts()))
        blast = _in_pod(
            kube, ns, _fill(BLAST, COUNT=str(DATAGRAMS), GATEWAY=gateway, MARKER=marker, **values)
        )
        busy = _tx_packets(outside) - busy_start
        busy_s = time.monotonic() - t0
    finally:
        capture.stop()
        control.stop()
    hello = "hello from the server pod"
    assert probe["pod"] == hello, probe  # the other node's pod, by its address
    assert probe["cluster_ip"] == hello, probe  # a ClusterIP (kube-proxy)
    assert probe["dns_short"] == hello and probe["dns_full"] == hello, probe  # CoreDNS
    assert probe["resolved"] == [pods["cluster_ip"]], probe
    assert str(probe["outside_name"]).startswith("error"), probe  # refused, not forwarded
    assert f"nameserver {k8s_lab.dns_service_ip}" in probe["resolv_conf"]
    # no default route: only the pod's subnet and the lab's range via its gateway
    destinations = {dest for dest, _gw, _flags in probe["routes"]}
    assert "00000000" not in destinations, probe["routes"]
    for dest in ("192.0.2.1", "1.1.1.1"):
        assert blast["outside"][dest] == "Network is unreachable", blast
    # the API server, by the `kubernetes` Service's address and by its DNS name
    assert set(api.values()) == {f"v{k8s_lab.k8s_version}"}, api
    assert blast["sent"] == 3 * DATAGRAMS
    assert any("marker" in why for why in control.leaked), "the control capture saw nothing"
    assert capture.drops == 0, "the capture missed frames: it proves nothing"
    assert capture.leaked == [], (capture.leaked[:10], _packet_filter_and_routes())
    # TX counters: the lab sent 3 * DATAGRAMS datagrams (and the probes' traffic); had they
    # left, the counters would grow by that much more than in the quiet window. The host's
    # own traffic (other jobs downloading...) varies between two windows of a few seconds:
    # a margin of half the lab's datagrams, scaled to the busy window's length.
    margin = 1.5 * DATAGRAMS
    expected_background = quiet * busy_s / 3
    print(
        f"TX on {outside}: {quiet} packets in 3 s quiet, {busy} in {busy_s:.1f} s of lab"
        f" traffic ({blast['sent']} datagrams + probes); {capture.frames} frames captured,"
        f" none of the lab's (on the bridge: {len(control.leaked)} of {control.frames})"
    )
    assert busy < expected_background + margin, (busy, quiet, busy_s)
