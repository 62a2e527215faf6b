"""The lab's second node: Ready beside the first, runs the pods pinned to it (under its own
kubelet, containerd and cgroup root), lets PostgreSQL move to it with its data on the shared
StorageClass, and `down` leaves nothing of it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.k8s import lanes
from tests.k8s.conftest import Kube, TwoNodes
from tests.k8s.lab import cluster, config, hoststate, loopdisk, podnet
from tests.k8s.lab.cluster import ClusterFacts
from tests.k8s.lab.config import Paths
from tests.k8s.lab.proc import is_same_process, proc_start_time
from tests.k8s.objects import claim, pg_pod, restricted_namespace, wait_for

pytestmark = pytest.mark.k8s


def _ready(node: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])


def _sleeper(name: str, ns: str, facts: ClusterFacts, node: str) -> dict[str, Any]:
    """A pod that prints its cgroups, then sleeps; pinned to `node` through the scheduler."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": facts.pg_image,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "cat /proc/self/cgroup; exec sleep 3600"],
                }
            ],
        },
    }


def _container_ids(node: config.NodeSpec) -> set[str]:
    out = subprocess.run(
        [
            str(cluster.CTR),
            "--address",
            str(node.containerd_sock),
            "-n",
            "k8s.io",
            "containers",
            "ls",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return set(out.stdout.split())


def test_both_nodes_ready_on_loopback(kube: Kube, two_nodes: TwoNodes) -> None:
    nodes = {n["metadata"]["name"]: n for n in kube.get("node")["items"]}
    assert set(nodes) == {two_nodes.first, two_nodes.second}
    assert all(_ready(n) for n in nodes.values())
    second = nodes[two_nodes.second]
    # The API server dials a kubelet by its Hostname address: an IP literal on loopback, which
    # no resolver is asked about; the kubelet listens there on ports of its own.
    addresses = {a["type"]: a["address"] for a in second["status"]["addresses"]}
    assert addresses["Hostname"] == config.NODE2_ADDRESS
    assert second["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == (
        config.NODE2_KUBELET_PORT
    )
    # With the lab up, its ports are taken: the check `up` makes names the second node's too,
    # and only when two nodes are asked for.
    paths = Paths.default()
    kubelet2 = f"{config.NODE2_ADDRESS}:{config.NODE2_KUBELET_PORT}"
    assert kubelet2 in (cluster.run_blockers(paths, nodes=2) or "")
    assert kubelet2 not in (cluster.run_blockers(paths, nodes=1) or "")


def test_a_pod_pinned_to_the_second_node_runs_there(
    kube: Kube, k8s_lab: ClusterFacts, two_nodes: TwoNodes
) -> None:
    ns = f"lab-node2-{uuid.uuid4().hex[:6]}"
    kube("create", "namespace", ns)
    try:
        kube.apply(_sleeper("on-two", ns, k8s_lab, two_nodes.second))
        kube("wait", "--for=condition=Ready", "pod/on-two", "-n", ns, "--timeout=120s")
        pod = kube.get("pod", "on-two", "-n", ns)
        assert pod["spec"]["nodeName"] == two_nodes.second
        # Run by the second node's containerd, not the first's ...
        container = pod["status"]["containerStatuses"][0]["containerID"].split("//", 1)[1]
        paths = Paths.default()
        assert container in _container_ids(paths.node(2))
        assert container not in _container_ids(paths.node(1))
        # ... in the second kubelet's cgroup root; logs and exec reach the second kubelet.
        cgroups = kube("logs", "-n", ns, "on-two").stdout.splitlines()
        assert cgroups and all(
            f":/{config.NODE2_CGROUP_ROOT}/kubepods/" in line for line in cgroups
        ), cgroups
        assert kube("exec", "-n", ns, "on-two", "--", "echo", "hi").stdout.strip() == "hi"
    finally:
        kube("delete", "namespace", ns, "--wait=true", timeout=120)


def test_postgres_moves_to_the_second_node_with_its_data(
    kube: Kube, k8s_lab: ClusterFacts, two_nodes: TwoNodes
) -> None:
    ns = f"lab-move-{uuid.uuid4().hex[:6]}"
    token = uuid.uuid4().hex
    kube.apply(restricted_namespace(ns))

    def sql(query: str) -> str:
        argv = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-Atc", query]
        return kube("exec", "-n", ns, "pg", "--", *argv).stdout.strip()

    def start_on(node: str) -> None:
        kube.apply(pg_pod(ns, k8s_lab, node=node))
        kube("wait", "--for=condition=Ready", "pod/pg", "-n", ns, "--timeout=180s", timeout=200)
        assert kube.get("pod", "pg", "-n", ns)["spec"]["nodeName"] == node

    try:
        # A ReadWriteMany claim binds before any pod uses it, to a volume tied to no node.
        kube.apply(claim(ns, two_nodes.shared_storage_class, access_mode="ReadWriteMany"))
        bound = wait_for(
            "the shared claim to bind",
            lambda: (c := kube.get("pvc", "data", "-n", ns))["status"]["phase"] == "Bound" and c,
        )
        pv = kube.get("pv", bound["spec"]["volumeName"])
        assert pv["spec"].get("nodeAffinity") is None
        assert Path(pv["spec"]["hostPath"]["path"]).parent == two_nodes.shared_volume_dir

        start_on(two_nodes.first)
        sql(f"CREATE TABLE moved (token text); INSERT INTO moved VALUES ('{token}')")
        kube("delete", "pod", "pg", "-n", ns, "--wait=true", timeout=120)
        start_on(two_nodes.second)
        assert sql("SELECT token FROM moved") == token
    finally:
        kube("delete", "namespace", ns, "--wait=true", timeout=180)
    # This namespace's volume only: the lab's other lane (tests/k8s/lanes.py) makes volumes
    # at the same time, and lab/pg's live through the session.
    wait_for(
        "the shared claim's PersistentVolume deleted",
        lambda: not [pv for pv in kube.get("pv")["items"] if _claim_namespace(pv) == ns],
        timeout=120,
    )
    assert list(two_nodes.shared_volume_dir.iterdir()) == []


def _claim_namespace(pv: dict[str, Any]) -> str | None:
    namespace = (pv["spec"].get("claimRef") or {}).get("namespace")
    return str(namespace) if namespace is not None else None


def _mounts_under(path: Path) -> list[Path]:
    return hoststate.mount_points_under(path)


BUILT_IN_CHAINS = ("INPUT", "FORWARD", "OUTPUT", "PREROUTING", "POSTROUTING")
BUILT_IN_POLICIES = frozenset(f":{chain} ACCEPT [0:0]" for chain in BUILT_IN_CHAINS)


def _empty_table_line(line: str) -> bool:
    """A line iptables-save writes for a table with no rules of its own: its name, a
    built-in chain's ACCEPT policy, COMMIT."""
    return line.startswith("*") or line == "COMMIT" or line in BUILT_IN_POLICIES


def _port_free(address: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


@pytest.mark.lab_teardown
def test_down_leaves_nothing_of_the_second_node(
    kube: Kube, k8s_lab: ClusterFacts, two_nodes: TwoNodes
) -> None:
    """Runs last (conftest orders it): it takes the session's lab down, with a pod running on
    the second node, and looks for anything left of that node on the host; and of the pod
    network: iptables-save, ip6tables-save, ip link and ip route as `up` found them."""
    paths = Paths.default()
    if cluster.started_by_hand(paths):
        pytest.skip("the lab was started by hand: this test would take it down")
    lanes.wait_for_peers()  # the guest lane's tests, when they run beside (lanes.py)
    node2 = paths.node(2)
    ns = f"lab-down-{uuid.uuid4().hex[:6]}"
    kube("create", "namespace", ns)
    kube.apply(_sleeper("on-two", ns, k8s_lab, two_nodes.second))
    kube("wait", "--for=condition=Ready", "pod/on-two", "-n", ns, "--timeout=120s")

    # What there is to clean up, so that finding none of it afterwards means something.
    status = cluster.status(paths)
    procs = {name: status["processes"][name]["pid"] for name in ("kubelet-2", "containerd-2")}
    sock = str(node2.containerd_sock)
    shims = [
        pid
        for _, pid, _ in cluster.lab_processes(paths)
        if sock in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        and pid not in procs.values()
    ]
    assert shims, "no containerd shim of the second node found"
    alive = {pid: proc_start_time(pid) for pid in [*procs.values(), *shims]}
    assert _mounts_under(node2.kubelet_root) and _mounts_under(node2.containerd_dir / "state")
    cgroup_dirs = hoststate.cgroup_root_dirs(config.NODE2_CGROUP_ROOT)
    assert all(os.path.isdir(d) for d in cgroup_dirs)
    assert hoststate.cgroup_pids(Path(cgroup_dirs[0]))  # the pod's processes are in there
    recorded = json.loads(paths.state_file.read_text())["network"]
    before_up = recorded["host_views"]
    during = podnet.host_views()
    assert during["ip link"] != before_up["ip link"]  # the bridges and veths are there
    assert during["iptables-save"] != before_up["iptables-save"]  # kube-proxy's, the nets'
    assert status["network_interfaces"] and podnet.IP_FORWARD.read_text().strip() == "1"
    assert status["loop_devices"]  # lab-wal's block device (loopdisk.py)

    cluster.down(paths)

    after_down = podnet.host_views()
    for view, lines in before_up.items():
        # HOWFAST-P-*: chains howfast's own partition events make, which tests of other
        # checkouts on this shared machine may add or remove meanwhile: not the lab's
        changed = [ln for ln in set(lines) ^ set(after_down[view]) if "HOWFAST-P-" not in ln]
        if any("HOWFAST-P-" in ln for ln in after_down[view]):
            # ...and such a chain keeps a table the lab made (and would delete once empty)
            changed = [ln for ln in changed if not _empty_table_line(ln)]
        assert changed == [], (view, changed)
    assert podnet.lab_interfaces() == []
    assert podnet.IP_FORWARD.read_text().strip() == recorded["ip_forward"]

    assert not [pid for pid, start in alive.items() if start and is_same_process(pid, start)]
    assert cluster.lab_processes(paths) == []
    assert _mounts_under(paths.run) == []
    assert [d for d in cgroup_dirs if os.path.exists(d)] == []
    assert all(_port_free(config.NODE2_ADDRESS, port) for port in config.NODE2_PORTS)
    # Of the second node's files only its image store is kept, for the next `up`.
    kept = sorted(str(p.relative_to(node2.dir)) for p in node2.dir.rglob("*") if p.is_file())
    assert all(k == "containerd/imported.json" or k.startswith("containerd/root/") for k in kept), [
        k for k in kept if not k.startswith("containerd/root/")
    ]
    after = cluster.status(paths)
    assert after["running"] is False and after["cgroups"] == [] and after["mounts"] == []
    assert after["loop_devices"] == [] and loopdisk.lab_loop_devices(paths.run) == []
    # The session's own teardown runs `down` again: it must keep the image stores.
    cluster.down(paths)
    assert (node2.containerd_dir / "root").is_dir()
    assert (paths.node(1).containerd_dir / "root").is_dir()
