"""Start, stop and inspect the lab cluster: a real Kubernetes of one or two nodes on this machine.

up():   the pod network (podnet.py: a bridge per node, routes, safety nets), etcd,
        kube-apiserver (on the first bridge's address), kube-controller-manager,
        kube-scheduler, kube-proxy, three local-path-provisioner processes, and per node a
        containerd and a kubelet (the second node's with their own root, state, sockets,
        ports, certificates and cgroup root), each a child in its own session, recorded by PID
        and start time in run/state.json before anything else happens; host state is recorded
        first; then CoreDNS (coredns.py) as a DaemonSet.
down(): stops all of it (by recorded PID; container shims by our socket paths; pod processes
        by the cgroups our kubelets made), unmounts everything below run/, removes the cgroups,
        the pod network, restores sysctls, iptables chains (and nftables tables) and host
        paths. Safe to call at any time, any number
        of times; `up` calls it first when a previous session left state behind (e.g. it was
        SIGKILLed).
lab():  a context manager for test sessions: up, yield the facts, and down in every case
        (exceptions, atexit, SIGTERM/SIGHUP/SIGINT).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from tests.k8s.lab import (
    build,
    config,
    coredns,
    hoststate,
    image_store,
    loopdisk,
    manifests,
    pki,
    podnet,
)
from tests.k8s.lab.config import NodeSpec, Paths
from tests.k8s.lab.proc import (
    LabError,
    LabUnavailable,
    is_same_process,
    log,
    proc_start_time,
    run,
    stop_processes,
    wait_until,
)

ETCD = Path("/usr/bin/etcd")
CONTAINERD = Path("/usr/bin/containerd")
CTR = Path("/usr/bin/ctr")
SHIM = Path("/usr/bin/containerd-shim-runc-v2")
CNI_PLUGINS = tuple(podnet.CNI_DIR / name for name in podnet.CNI_PLUGINS)
# Stopped in this order: what creates objects first, the runtime after, the store last.
# A node's processes are named with its suffix: "kubelet", "kubelet-2".
STOP_ORDER = (
    "kube-proxy",
    "provisioner-shared",
    "provisioner-tmpfs",
    "provisioner-disk",
    "provisioner-wal",
    "kube-scheduler",
    "kube-controller-manager",
    "kubelet-2",
    "kubelet",
)
STOP_ORDER_LATE = ("containerd-2", "containerd", "kube-apiserver", "etcd")
# What a containerd keeps of its pods below its root: removed by `down`, unlike its image store.
CRI_STATE_DIRS = ("io.containerd.grpc.v1.cri", "io.containerd.runtime.v2.task")
PROVISIONERS = (
    # key, StorageClass, provisioner name, volume directory (a Paths attribute), shared by nodes
    ("disk", config.SC_DISK, config.PROVISIONER_DISK, "disk_volumes", False),
    ("tmpfs", config.SC_TMPFS, config.PROVISIONER_TMPFS, "tmpfs_volumes", False),
    ("shared", config.SC_SHARED, config.PROVISIONER_SHARED, "shared_volumes", True),
    # on the lab's loop device (loopdisk.py), mounted at `up` before its provisioner starts
    ("wal", config.SC_WAL, config.PROVISIONER_WAL, "wal_volumes", False),
)


@dataclass(frozen=True)
class ClusterFacts:
    kubeconfig: Path
    kubectl: Path
    server: str  # the API server, at the first node's bridge address (host and pods reach it)
    node: str  # the first node
    nodes: tuple[str, ...]  # every node, the first one first
    # node -> its kubelet's cgroupRoot: "/" for the first, "/howfast-lab-node2" for the second
    node_cgroup_roots: dict[str, str]
    k8s_version: str
    storage_classes: dict[str, str]
    default_storage_class: str
    provisioned_classes: tuple[str, ...]
    no_provisioner_class: str
    shared_storage_class: str  # volumes without node affinity: every node can mount them
    pg_image: str
    pg_uid: int
    pg_gid: int
    pg_bindir: str
    volume_dirs: dict[str, Path]
    cgroup_v2: bool
    started_in_s: float
    cache_dir: Path = field(default=Path())
    # the pod network (see podnet.py): node -> its bridge and its pods' subnet
    node_bridges: dict[str, str] = field(default_factory=dict)
    node_subnets: dict[str, str] = field(default_factory=dict)
    lab_range: str = config.LAB_RANGE
    # volumes on a block device of their own (a loop device): apart from every other class's
    wal_storage_class: str = config.SC_WAL
    service_cidr: str = config.SERVICE_CIDR
    dns_service_ip: str = config.DNS_SERVICE_IP
    cluster_domain: str = config.CLUSTER_DOMAIN

    def as_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(asdict(self), default=str))  # type: ignore[no-any-return]


# --- state file -----------------------------------------------------------------------------------


def _load_state(paths: Paths) -> dict[str, Any] | None:
    try:
        return json.loads(paths.state_file.read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


def _save_state(paths: Paths, state: dict[str, Any]) -> None:
    tmp = paths.state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(paths.state_file)


# --- helpers --------------------------------------------------------------------------------------


def kubectl(
    paths: Paths, *args: str, input: str | None = None, timeout: float = 60, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return run(
        [paths.kubectl, "--kubeconfig", paths.admin_kubeconfig, *args],
        input=input,
        timeout=timeout,
        check=check,
    )


def _ctr(node: NodeSpec, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    argv: list[str | os.PathLike[str]] = [CTR, "--address", node.containerd_sock]
    argv += ["--namespace", "k8s.io", *args]
    return run(argv, check=False, timeout=timeout)


def _port_in_use(address: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            return True
    return False


def node_specs(paths: Paths, count: int) -> list[NodeSpec]:
    if count not in (1, 2):
        raise LabError(f"the lab runs 1 or 2 nodes, not {count}")
    return [paths.node(i) for i in range(1, count + 1)]


def expected_processes(count: int) -> set[str]:
    """The names of every process a healthy lab of `count` nodes runs."""
    names = {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"}
    names |= {f"provisioner-{key}" for key, *_ in PROVISIONERS}
    for i in range(1, count + 1):
        suffix = config.node_suffix(i)
        names |= {f"containerd{suffix}", f"kubelet{suffix}"}
    return names


def run_blockers(paths: Paths, nodes: int = 1) -> str | None:
    """Why the cluster cannot start here (after stale state is cleaned), or None."""
    if os.geteuid() != 0:
        return "the k8s lab needs root (containerd, kubelet)"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlay filesystem (containerd's snapshotter needs it)"
    if not hoststate.cgroup_hierarchies():
        return "no cgroup filesystem mounted under /sys/fs/cgroup"
    for exe in (ETCD, CONTAINERD, CTR, *CNI_PLUGINS, Path("/usr/sbin/runc")):
        if not exe.exists():
            return f"{exe} is missing (run `python -m tests.k8s.lab build`)"
    for node in node_specs(paths, nodes):
        sock = str(node.containerd_sock) + ".ttrpc"
        if len(sock.encode()) > 107:
            return f"the cache dir path is too long for a unix socket path: {sock}"
    # the API server listens on the first bridge's address, which does not exist yet: any
    # listener on its port (wildcard or not) would clash
    listen = [("127.0.0.1", p) for p in config.PORTS] + [("0.0.0.0", config.API_PORT)]
    if nodes >= 2:
        listen += [(config.NODE2_ADDRESS, p) for p in config.NODE2_PORTS]
    busy = [f"{addr}:{port}" for addr, port in listen if _port_in_use(addr, port)]
    if busy:
        return f"ports in use on loopback (another cluster or program?): {busy}"
    taken_links = [n.bridge for n in node_specs(paths, nodes) if podnet.link_exists(n.bridge)]
    if taken_links:
        return f"network interface {taken_links[0]} exists (a lab of another cache dir?)"
    if nodes >= 2:
        taken = [
            d for d in hoststate.cgroup_root_dirs(config.NODE2_CGROUP_ROOT) if os.path.isdir(d)
        ]
        if taken:
            return (
                f"cgroup {taken[0]} exists (a lab of another cache dir?): the second node's"
                " kubelet needs a cgroup root that no other kubelet uses"
            )
    return None


class _Starter:
    """Starts the lab's processes and records each one in the state file at once."""

    def __init__(self, paths: Paths, state: dict[str, Any]) -> None:
        self.paths = paths
        self.state = state
        self.logs = paths.run / "logs"

    def start(self, name: str, argv: list[str | os.PathLike[str]], **env: str) -> None:
        log_path = self.logs / f"{name}.log"
        with log_path.open("ab") as out:
            proc = subprocess.Popen(
                [os.fspath(a) for a in argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # survives the CLI; never gets the terminal's ^C
                env={**os.environ, **env},
                cwd=self.paths.run,
            )
        start_time = proc_start_time(proc.pid)
        self.state["processes"].append(
            {"name": name, "pid": proc.pid, "start_time": start_time, "argv0": str(argv[0])}
        )
        _save_state(self.paths, self.state)

    def alive(self, name: str) -> bool:
        for p in self.state["processes"]:
            if p["name"] == name:
                return is_same_process(p["pid"], p["start_time"])
        return False

    def wait(self, what: str, name: str, check: Any, timeout: float) -> None:
        """wait_until, but fail at once with the log's tail if process `name` died."""

        def probe() -> object:
            if not self.alive(name):
                tail = (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]
                raise _Died(f"{name} exited while waiting for {what}; its log ends with:\n{tail}")
            return check()

        try:
            wait_until(what, probe, timeout)
        except _Died as exc:
            raise LabError(str(exc)) from None
        log(f"{what}: ready")


class _Died(Exception):
    pass


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as resp:  # our own loopback URL
        return bool(resp.status == 200)


def _cmd_ok(argv: list[str | os.PathLike[str]]) -> bool:
    return run(argv, check=False, timeout=10).returncode == 0


# --- up -------------------------------------------------------------------------------------------


def _owner_alive(state: dict[str, Any]) -> bool:
    owner = state.get("owner")
    return owner is not None and is_same_process(owner["pid"], owner["start_time"])


def started_by_hand(paths: Paths) -> bool:
    """True while a lab started with `python -m tests.k8s.lab up` (no owner) is recorded."""
    state = _load_state(paths)
    return state is not None and state.get("owner", "?") is None


def running_facts(paths: Paths) -> ClusterFacts | None:
    """The facts of a healthy lab started by hand (`python -m tests.k8s.lab up`) and still
    running from this cache dir, else None. A lab that a test session started is never
    adopted: its session tears it down, or it was killed and its lab is stale."""
    state = _load_state(paths)
    if state is None or not state["processes"] or state.get("owner", "?") is not None:
        return None
    alive = {p["name"] for p in state["processes"] if is_same_process(p["pid"], p["start_time"])}
    nodes = int(state.get("nodes", 1))
    if alive != expected_processes(nodes):
        return None
    if kubectl(paths, "get", "--raw", "/readyz", check=False, timeout=5).returncode != 0:
        return None
    return facts(paths, nodes=nodes)


def up(
    paths: Paths | None = None, owner_pid: int | None = None, nodes: int | None = None
) -> ClusterFacts:
    """Build what is missing, clean what a previous session left, start the cluster.

    owner_pid: the process whose life bounds the cluster's (a test session), None for a lab
    started by hand. nodes: 1 or 2 (default: config.default_nodes()). A healthy lab started by
    hand is returned as it is, whatever its number of nodes; a lab whose owner is still alive
    belongs to another session (LabUnavailable); any other state is stale and is cleaned up
    first."""
    paths = paths or Paths.default()
    nodes = config.default_nodes() if nodes is None else nodes
    node_specs(paths, nodes)  # refuses a count the lab cannot run, before anything starts
    build.ensure_built(paths)
    running = running_facts(paths)
    if running is not None:
        log(f"the lab is already running (started by hand, {len(running.nodes)} node(s)): using it")
        return running
    state = _load_state(paths)
    if state is not None and _owner_alive(state) and state["owner"]["pid"] != os.getpid():
        raise LabUnavailable(f"the lab is in use by another session (pid {state['owner']['pid']})")
    if state is not None or lab_processes(paths):
        log("state of an earlier lab found (killed session?): cleaning it up first")
        down(paths)
    blocker = run_blockers(paths, nodes)
    if blocker:
        raise LabUnavailable(blocker)
    try:
        return _up(paths, owner_pid, nodes)
    except BaseException:
        log("start-up failed: tearing down what was started")
        down(paths)
        raise


def _up(paths: Paths, owner_pid: int | None, node_count: int) -> ClusterFacts:
    t0 = time.monotonic()
    r, b, p = paths.run, paths.bin, paths.pki
    nodes = node_specs(paths, node_count)
    for d in ("logs", "cni-bin"):
        (r / d).mkdir(parents=True, exist_ok=True)
    for node in nodes:
        for node_dir in (node.containerd_dir, node.kubelet_dir, node.pod_logs, node.runc_root):
            node_dir.mkdir(parents=True, exist_ok=True)
        pki.ensure_node_pki(node)
    # Host state first, saved before anything changes, so that down() can always restore it.
    state: dict[str, Any] = {
        "version": config.K8S_VERSION,
        "nodes": node_count,
        "processes": [],
        "mounts": [],
    }
    state.update(hoststate.snapshot())
    state["network"] = podnet.snapshot()
    state["started_at"] = time.time()
    state["owner"] = (
        None if owner_pid is None else {"pid": owner_pid, "start_time": proc_start_time(owner_pid)}
    )
    _save_state(paths, state)
    starter = _Starter(paths, state)
    cgroup_v1 = not state["cgroup_v2"]
    podnet.setup(paths, nodes, state["network"], lambda: _save_state(paths, state))
    pki.write_kubeconfigs(p, paths.kubeconfigs, nodes)

    # Volumes: one directory on disk, one on a tmpfs of its own, one shared by the nodes, one
    # on a block device of the lab's own (its image and mount below run/: found by `down`).
    state["mounts"].append(str(paths.wal_disk))
    _save_state(paths, state)
    t_disk = time.monotonic()
    device = loopdisk.setup(r, paths.wal_disk)
    took = time.monotonic() - t_disk
    log(f"{config.SC_WAL}: {device} mounted at {paths.wal_disk} in {took:.2f}s")
    for *_, attr, _ in PROVISIONERS:
        getattr(paths, attr).mkdir(exist_ok=True)
    state["mounts"].append(str(paths.tmpfs_volumes))
    _save_state(paths, state)
    run(
        [
            "mount", "-t", "tmpfs", "-o", f"size={config.TMPFS_SIZE},mode=0755",
            "howfast-lab-tmpfs", paths.tmpfs_volumes,
        ]
    )  # fmt: skip

    etcd_url = f"http://127.0.0.1:{config.ETCD_CLIENT_PORT}"
    peer_url = f"http://127.0.0.1:{config.ETCD_PEER_PORT}"
    starter.start(
        "etcd",
        [
            ETCD, "--name", "lab", "--data-dir", r / "etcd",
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"lab={peer_url}",
            "--listen-metrics-urls", f"http://127.0.0.1:{config.ETCD_METRICS_PORT}",
            "--quota-backend-bytes", str(1 << 30), "--snapshot-count", "10000",
        ],
    )  # fmt: skip
    starter.wait("etcd", "etcd", lambda: _http_ok(f"{etcd_url}/health"), 30)

    # A containerd per node, each attaching its pods to its node's bridge (podnet.setup).
    for node in nodes:
        toml = node.containerd_dir / "config.toml"
        toml.write_text(manifests.containerd_config(paths, node))
        starter.start(f"containerd{node.suffix}", [CONTAINERD, "--config", toml])
    for node in nodes:
        starter.wait(
            f"containerd{node.suffix}",
            f"containerd{node.suffix}",
            lambda node=node: _ctr(node, "version").returncode == 0,
            30,
        )
        _import_images(paths, node)

    apiserver = b / "kube-apiserver"
    starter.start(
        "kube-apiserver",
        [
            apiserver, f"--etcd-servers={etcd_url}",
            # on the first bridge's address, which the host and every pod reach; the
            # `kubernetes` Service points there (lease reconciler), for in-cluster clients
            f"--bind-address={config.API_ADDRESS}", f"--advertise-address={config.API_ADDRESS}",
            f"--secure-port={config.API_PORT}",
            f"--service-cluster-ip-range={config.SERVICE_CIDR}",
            "--endpoint-reconciler-type=lease",
            f"--tls-cert-file={p}/apiserver.crt", f"--tls-private-key-file={p}/apiserver.key",
            f"--client-ca-file={p}/ca.crt",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p}/sa.pub",
            f"--service-account-signing-key-file={p}/sa.key",
            "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
            "--allow-privileged=true",
            f"--kubelet-client-certificate={p}/apiserver-kubelet-client.crt",
            f"--kubelet-client-key={p}/apiserver-kubelet-client.key",
            "--kubelet-preferred-address-types=Hostname",
            "--profiling=false", "--v=1",
        ],
    )  # fmt: skip
    starter.wait(
        "kube-apiserver",
        "kube-apiserver",
        lambda: kubectl(paths, "get", "--raw", "/readyz", timeout=5).returncode == 0,
        120,
    )

    common = ["--bind-address=127.0.0.1", "--leader-elect=false", "--profiling=false", "--v=1"]
    kc = paths.kubeconfigs
    cm_kc = kc / "controller-manager.kubeconfig"
    starter.start(
        "kube-controller-manager",
        [
            b / "kube-controller-manager", f"--kubeconfig={cm_kc}",
            f"--authentication-kubeconfig={cm_kc}", f"--authorization-kubeconfig={cm_kc}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={p}/sa.key", f"--root-ca-file={p}/ca.crt",
            f"--cluster-signing-cert-file={p}/ca.crt", f"--cluster-signing-key-file={p}/ca.key",
            f"--service-cluster-ip-range={config.SERVICE_CIDR}",
            *common,
        ],
    )  # fmt: skip
    sched_kc = kc / "scheduler.kubeconfig"
    starter.start(
        "kube-scheduler",
        [
            b / "kube-scheduler", f"--kubeconfig={sched_kc}",
            f"--authentication-kubeconfig={sched_kc}", f"--authorization-kubeconfig={sched_kc}",
            *common,
        ],
    )  # fmt: skip
    _start_kube_proxy(starter, paths)

    for node in nodes:
        if node.cgroup_root is not None:
            # recorded before it exists, so that down() removes it even if up dies half-way
            state["cgroup_roots"] = hoststate.cgroup_root_dirs(node.cgroup_root)
            _save_state(paths, state)
            hoststate.make_cgroup_root(node.cgroup_root)
        kubelet_cfg = node.kubelet_dir / "config.json"
        kubelet_cfg.write_text(manifests.kubelet_config(paths, node, cgroup_v1))
        starter.start(
            f"kubelet{node.suffix}",
            [
                b / "kubelet", f"--config={kubelet_cfg}", f"--kubeconfig={node.kubeconfig}",
                f"--root-dir={node.kubelet_root}", f"--hostname-override={node.name}", "--v=1",
            ],
        )  # fmt: skip
    for node in nodes:
        starter.wait(
            f"node/{node.name} Ready",
            f"kubelet{node.suffix}",
            lambda node=node: (
                kubectl(
                    paths, "wait", "--for=condition=Ready", f"node/{node.name}", "--timeout=2s",
                    check=False,
                ).returncode
                == 0
            ),
            180,
        )  # fmt: skip
    # A pod created before the default service account exists is refused.
    starter.wait(
        "service account default/default",
        "kube-controller-manager",
        lambda: kubectl(paths, "get", "serviceaccount", "default", check=False).returncode == 0,
        60,
    )

    # Storage: dynamic provisioners on different storage (one of them shared by the nodes) + a
    # class without one.
    kubectl(paths, "apply", "-f", "-", input=json.dumps(manifests.storage_objects()))
    helper = r / "helper-pod.json"
    helper.write_text(manifests.helper_pod())
    for key, name, provisioner, attr, shared in PROVISIONERS:
        cfg = r / f"provisioner-{key}.json"
        cfg.write_text(manifests.provisioner_config(getattr(paths, attr), shared))
        starter.start(
            f"provisioner-{key}",
            [
                b / "local-path-provisioner", "start",
                "--kubeconfig", kc / "provisioner.kubeconfig",
                "--namespace", manifests.STORAGE_NAMESPACE,
                "--service-account-name", manifests.PROVISIONER_SA,
                "--provisioner-name", provisioner,
                "--configmap-name", f"{name}-config",
                "--config", cfg,
                "--helper-pod-file", helper,
                "--helper-image", config.PG_IMAGE,
            ],
        )  # fmt: skip
    kubectl(paths, "apply", "-f", "-", input=json.dumps(coredns.objects()))
    time.sleep(0.5)
    for key, *_ in PROVISIONERS:
        if not starter.alive(f"provisioner-{key}"):
            tail = (r / "logs" / f"provisioner-{key}.log").read_text()[-2000:]
            raise LabError(f"provisioner-{key} exited at start:\n{tail}")
    # Cluster DNS on every node: its pods reach the API server through the `kubernetes`
    # Service, so this proves the pod network, kube-proxy and the in-cluster address too.
    starter.wait(
        "CoreDNS ready on every node",
        "kube-proxy",
        lambda: _daemonset_ready(paths, coredns.NAMESPACE, coredns.NAME, node_count),
        120,
    )
    elapsed = time.monotonic() - t0
    log(f"{node_count} node(s) up in {elapsed:.1f}s (kubeconfig: {paths.admin_kubeconfig})")
    return facts(paths, elapsed, node_count)


def _start_kube_proxy(starter: _Starter, paths: Paths) -> None:
    """One kube-proxy for the machine (iptables mode): both nodes share this kernel's
    netfilter, and two would rewrite each other's rules. It changes no sysctl (conntrack
    settings 0, no localhost NodePorts); its chains go at `down` (hoststate.restore_iptables)."""
    starter.start(
        "kube-proxy",
        [
            paths.bin / "kube-proxy", f"--kubeconfig={paths.kubeconfigs / 'kube-proxy.kubeconfig'}",
            "--proxy-mode=iptables", f"--cluster-cidr={config.CLUSTER_CIDR}",
            f"--hostname-override={config.NODE_NAME}",
            f"--healthz-bind-address=127.0.0.1:{config.KUBE_PROXY_HEALTHZ_PORT}",
            f"--metrics-bind-address=127.0.0.1:{config.KUBE_PROXY_METRICS_PORT}",
            "--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0",
            "--conntrack-tcp-timeout-close-wait=0", "--iptables-localhost-nodeports=false",
            "--v=1",
        ],
    )  # fmt: skip


def _daemonset_ready(paths: Paths, namespace: str, name: str, count: int) -> bool:
    proc = kubectl(paths, "-n", namespace, "get", "daemonset", name, "-o", "json", check=False)
    if proc.returncode != 0:
        return False
    status = json.loads(proc.stdout).get("status", {})
    return int(status.get("numberReady", 0)) >= count


def facts(paths: Paths, started_in_s: float = 0.0, nodes: int = 1) -> ClusterFacts:
    specs = node_specs(paths, nodes)
    return ClusterFacts(
        kubeconfig=paths.admin_kubeconfig,
        kubectl=paths.kubectl,
        server=pki.API_URL,
        node=config.NODE_NAME,
        nodes=tuple(node.name for node in node_specs(paths, nodes)),
        node_cgroup_roots={
            node.name: f"/{node.cgroup_root or ''}" for node in node_specs(paths, nodes)
        },
        k8s_version=config.K8S_VERSION,
        storage_classes={
            config.SC_DISK: "local-path-provisioner on a directory on disk",
            config.SC_TMPFS: "local-path-provisioner on a tmpfs directory",
            config.SC_SHARED: "local-path-provisioner on one host directory that every node"
            " mounts: emulates network storage (no node affinity)",
            config.SC_WAL: "local-path-provisioner on a block device of its own (a loop device"
            " on an image file): its I/O is counted apart from the other classes'",
            config.SC_NONE: "no provisioner: claims stay Pending",
        },
        default_storage_class=config.SC_DISK,
        provisioned_classes=tuple(name for _, name, *_ in PROVISIONERS),
        no_provisioner_class=config.SC_NONE,
        shared_storage_class=config.SC_SHARED,
        pg_image=config.PG_IMAGE,
        pg_uid=config.PG_UID,
        pg_gid=config.PG_GID,
        pg_bindir=config.PG_BINDIR,
        volume_dirs={name: getattr(paths, attr) for _, name, _, attr, _ in PROVISIONERS},
        cgroup_v2=hoststate.cgroup_v2(),
        started_in_s=round(started_in_s, 1),
        cache_dir=paths.root,
        node_bridges={node.name: node.bridge for node in specs},
        node_subnets={node.name: node.subnet for node in specs},
    )


def _image_marker(tar: Path) -> str:
    st = tar.stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


def _import_images(paths: Paths, node: NodeSpec) -> None:
    """Import the image tarballs into a node's containerd, unless its kept store has them."""
    markers = node.containerd_dir / "imported.json"
    try:
        done: dict[str, str] = json.loads(markers.read_text())
    except (OSError, ValueError):
        done = {}
    listed = _ctr(node, "images", "ls", "-q").stdout.split()
    for tar, ref in (
        (paths.images / "pause.tar", config.PAUSE_IMAGE),
        (paths.images / "pgfio.tar", config.PG_IMAGE),
        (paths.images / "coredns.tar", config.COREDNS_IMAGE),
    ):
        if done.get(ref) == _image_marker(tar) and any(ref in name for name in listed):
            continue
        t0 = time.monotonic()
        proc = _ctr(node, "images", "import", "--no-unpack=false", str(tar), timeout=300)
        if proc.returncode != 0:
            raise LabError(f"ctr images import {tar} failed: {proc.stderr.strip()}")
        done[ref] = _image_marker(tar)
        markers.write_text(json.dumps(done))
        log(f"image {ref} imported into node {node.name} in {time.monotonic() - t0:.1f}s")
    # a rebuilt image replaced its name: the old one's ID is removed with its content
    ctr = [str(CTR), "--address", str(node.containerd_sock), "--namespace", "k8s.io"]
    image_store.remove_orphans(ctr)


# --- down -----------------------------------------------------------------------------------------


def lab_processes(paths: Paths) -> list[tuple[str, int, int]]:
    """Processes of a lab in this cache dir, found by scanning /proc (for state-less cleanup):
    binaries from our bin/, and etcd, containerd or its shims whose command line names our
    run dir. Nothing else (a `tail -f` of a lab log is not the lab)."""
    found = []
    bin_dir, run_dir = str(paths.bin) + "/", str(paths.run) + "/"
    system_exes = {str(ETCD), str(CONTAINERD), str(SHIM)}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            exe = os.readlink(entry / "exe")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ours = exe.startswith(bin_dir) or (exe in system_exes and run_dir in cmdline + " ")
        if ours:
            start = proc_start_time(int(entry.name))
            if start is not None:
                found.append((Path(exe).name, int(entry.name), start))
    return found


def _lab_cgroups(state: dict[str, Any]) -> list[str]:
    """The cgroup trees of our kubelets: the kubepods they made (absent before `up`) and the
    second node's cgroup root. Without the record, whose kubepods would they be?"""
    tops = []
    if "kube_cgroups_before" in state:
        before = set(state["kube_cgroups_before"])
        tops += [top for top in hoststate.kube_cgroups() if top not in before]
    tops += [top for top in state.get("cgroup_roots", []) if os.path.isdir(top)]
    return tops


def _pod_processes(state: dict[str, Any]) -> list[tuple[str, int, int]]:
    """Processes in the cgroups our kubelets made."""
    procs = []
    for top in _lab_cgroups(state):
        for pid in hoststate.cgroup_pids(Path(top)):
            start = proc_start_time(pid)
            if start is not None:
                procs.append(("pod process", pid, start))
    return procs


def down(paths: Paths | None = None, keep_images: bool = True) -> None:
    """Stop everything and restore the host. Idempotent; never raises for a missing part."""
    paths = paths or Paths.default()
    t0 = time.monotonic()
    state = _load_state(paths)
    if state is None and not lab_processes(paths) and _only_kept_stores(paths):
        log("down: nothing to do")
        return
    state = state or {"processes": [], "mounts": []}
    recorded = [(p["name"], p["pid"], p["start_time"]) for p in state["processes"]]

    def named(names: tuple[str, ...]) -> list[tuple[str, int, int]]:
        return [p for n in names for p in recorded if p[0] == n]

    stop_processes(named(STOP_ORDER))
    # A node's image store is kept when its containers are all gone, or when it did not run.
    keep_store = {}
    for node in (paths.node(1), paths.node(2)):
        name = f"containerd{node.suffix}"
        if any(p[0] == name and is_same_process(p[1], p[2]) for p in recorded):
            keep_store[node] = _remove_containers(node)
        else:
            started = any(p[0] == name for p in recorded)
            keep_store[node] = bool(state.get("nodes")) and not started
    # Container processes and shims: pods' cgroups, then shims started for our socket.
    stop_processes(_pod_processes(state), grace=2)
    stop_processes(
        [p for p in lab_processes(paths) if "shim" in p[0] or p[0] == "pod process"], grace=2
    )
    # etcd last, alone: the API server's lease reconciler writes to it while shutting down
    # (with etcd gone at the same time, it ignored SIGTERM for 5 s)
    stop_processes(named(tuple(n for n in STOP_ORDER_LATE if n != "etcd")))
    stop_processes(named(("etcd",)))
    leftovers = lab_processes(paths)
    if leftovers:
        log(f"killing unrecorded lab processes: {leftovers}")
        stop_processes(leftovers, grace=3)
    left_mounts = hoststate.unmount_all_under(paths.run)
    if left_mounts:
        log(f"WARNING: still mounted below {paths.run}: {left_mounts}")
    left_loops = loopdisk.detach_all(paths.run)
    if left_loops:
        log(f"WARNING: loop devices on files below {paths.run} still attached: {left_loops}")
    for group in loopdisk.count_cgroups():  # made and removed at once by `up`: unless killed
        with contextlib.suppress(OSError):
            os.rmdir(group)
    for top in _lab_cgroups(state):
        if not hoststate.remove_cgroup_tree(Path(top)):
            log(f"WARNING: cgroup {top} could not be removed")
    if "network" in state:
        podnet.teardown(state["network"])
    if "iptables" in state:
        hoststate.restore_iptables(state["iptables"])
    if "network" in state:
        podnet.remove_new_tables(state["network"].get("nft_tables"))
    if "sysctls" in state:
        hoststate.restore_sysctls(state["sysctls"])
    if "absent_paths" in state:
        hoststate.remove_created_paths(state["absent_paths"])
    # Keep the component logs of the last cluster; remove the rest of run/ (unless mounted).
    logs = paths.run / "logs"
    if logs.is_dir():
        last = paths.logs / "last-run"
        shutil.rmtree(last, ignore_errors=True)
        shutil.copytree(logs, last)
    if not left_mounts and not left_loops:
        _remove_run_dir(paths, [n for n, keep in keep_store.items() if keep and keep_images])
    log(f"down: done in {time.monotonic() - t0:.1f}s")


def _remove_containers(node: NodeSpec) -> bool:
    """Kill and remove every container of a node's containerd; True if none is left."""
    tasks = _ctr(node, "tasks", "ls", "-q").stdout.split()
    for task in tasks:
        _ctr(node, "tasks", "kill", "--signal", "SIGKILL", task)
    deadline = time.monotonic() + 5
    for task in tasks:
        while time.monotonic() < deadline:
            if _ctr(node, "tasks", "delete", task).returncode == 0:
                break
            # containerd's CRI plugin deletes a task that exited on its own: "not found" is
            # done too (retrying it until the deadline cost 5 s a node with any pod left)
            if task not in _ctr(node, "tasks", "ls", "-q").stdout.split():
                break
            time.sleep(0.2)
    for container in _ctr(node, "containers", "ls", "-q").stdout.split():
        _ctr(node, "containers", "delete", container)
    listed = _ctr(node, "containers", "ls", "-q")
    return listed.returncode == 0 and not listed.stdout.split()


def _remove_run_dir(paths: Paths, keep_stores: list[NodeSpec]) -> None:
    """Remove run/, except the containerd content and snapshots of the nodes in `keep_stores`
    (their containers were all removed, or they did not run): the next `up` then skips the
    image import."""
    if not paths.run.exists():
        return
    keep: set[Path] = set()
    for node in keep_stores:
        root = node.containerd_dir / "root"
        if root.is_dir():
            keep |= {root, node.containerd_dir / "imported.json"}
            for name in CRI_STATE_DIRS:
                _rm(root / name)
    _remove_all_but(paths.run, keep)


def _only_kept_stores(paths: Paths) -> bool:
    """True when run/ holds nothing but what a finished `down` keeps (or does not exist): a
    second `down` must not delete the image stores."""
    if loopdisk.lab_loop_devices(paths.run):
        return False
    if not paths.run.exists():
        return True
    if hoststate.mount_points_under(paths.run):
        return False
    allowed = {paths.run: {"containerd", "node2"}, paths.run / "node2": {"containerd"}}
    for node in (paths.node(1), paths.node(2)):
        allowed[node.containerd_dir] = {"root", "imported.json"}
    for directory, names in allowed.items():
        if directory.is_dir() and not {e.name for e in directory.iterdir()} <= names:
            return False
    for node in (paths.node(1), paths.node(2)):
        root = node.containerd_dir / "root"
        if any((root / d).exists() for d in CRI_STATE_DIRS):
            return False
    return True


def _remove_all_but(top: Path, keep: set[Path]) -> None:
    """Remove everything below `top` except the paths in `keep` (and the directories above
    them); `top` itself goes too when nothing below it is kept."""
    if not any(top in k.parents for k in keep):
        shutil.rmtree(top, ignore_errors=True)
        return
    for entry in top.iterdir():
        if entry in keep:
            continue
        if entry.is_dir() and not entry.is_symlink() and any(entry in k.parents for k in keep):
            _remove_all_but(entry, keep)
        else:
            _rm(entry)


def _rm(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def prune(paths: Paths | None = None) -> None:
    """Free the disk that only a rebuild or a faster start needs; keeps bin/, images/, pki/."""
    paths = paths or Paths.default()
    if paths.go_root.exists():
        shutil.rmtree(paths.go_root)
        log(f"removed {paths.go_root}")
    if _load_state(paths) is None and not lab_processes(paths) and paths.run.exists():
        if hoststate.mount_points_under(paths.run) or loopdisk.lab_loop_devices(paths.run):
            log(f"not removing {paths.run}: something is mounted or attached below it (run `down`)")
        else:
            shutil.rmtree(paths.run)
            log(f"removed {paths.run}")


# --- status ---------------------------------------------------------------------------------------


def status(paths: Paths | None = None) -> dict[str, Any]:
    paths = paths or Paths.default()
    state = _load_state(paths) or {"processes": []}
    procs = {
        p["name"]: {"pid": p["pid"], "alive": is_same_process(p["pid"], p["start_time"])}
        for p in state["processes"]
    }
    api_ready = False
    if paths.kubectl.exists() and paths.admin_kubeconfig.exists() and procs:
        api_ready = (
            kubectl(paths, "get", "--raw", "/readyz", check=False, timeout=5).returncode == 0
        )

    def size(p: Path) -> int:
        if not p.exists():
            return 0
        out = run(["du", "-sb", p], check=False).stdout.split()
        return int(out[0]) if out else 0

    return {
        "cache_dir": str(paths.root),
        "built": build.is_built(paths),
        "running": any(p["alive"] for p in procs.values()),
        "api_ready": api_ready,
        "nodes": [n.name for n in node_specs(paths, int(state.get("nodes", 1)))] if procs else [],
        "kubeconfig": str(paths.admin_kubeconfig),
        "processes": procs,
        "unrecorded_lab_processes": [
            {"name": n, "pid": pid}
            for n, pid, _ in lab_processes(paths)
            if pid not in {p["pid"] for p in procs.values()}
        ],
        "mounts": [str(m) for m in hoststate.mount_points_under(paths.run)],
        "loop_devices": loopdisk.lab_loop_devices(paths.run),
        # the lab's bridges and the veths on them
        "network_interfaces": podnet.lab_interfaces(),
        # the second node's cgroup root, whoever made it, and our kubelets' kubepods
        "cgroups": sorted(
            {
                *(
                    d
                    for d in hoststate.cgroup_root_dirs(config.NODE2_CGROUP_ROOT)
                    if os.path.isdir(d)
                ),
                *_lab_cgroups(state),
            }
        ),
        "disk_bytes": {
            "bin": size(paths.bin),
            "images": size(paths.images),
            "run": size(paths.run),
            "go_caches": size(paths.go_root),
        },
    }


# --- for test sessions ----------------------------------------------------------------------------

_HANDLED = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def lab(paths: Paths | None = None, nodes: int | None = None) -> Iterator[ClusterFacts]:
    """The cluster (of `nodes` nodes, see up()) for the duration of a `with` block; torn down
    however the block ends. (A lab that is already running when the block starts is used and
    left running, whatever its number of nodes.)

    SIGTERM and SIGHUP raise KeyboardInterrupt, as SIGINT does, so the finally clause runs
    (and pytest stops the session); atexit covers an interpreter that exits some other way.
    A SIGKILL cannot be caught: the next up() finds the state file and cleans up first.
    """
    paths = paths or Paths.default()
    torn_down = False

    def teardown() -> None:
        nonlocal torn_down
        if torn_down:
            return
        torn_down = True
        # A second ^C or SIGTERM must not cut the teardown short.
        masked = {s: signal.signal(s, signal.SIG_IGN) for s in (*_HANDLED, signal.SIGINT)}
        try:
            down(paths)
        finally:
            for sig, handler in masked.items():
                signal.signal(sig, handler)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        # What ^C does: pytest stops the session and runs every teardown.
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    running = running_facts(paths)
    if running is not None:
        log("the lab is already running (started by hand?): using it, leaving it up")
        yield running
        return
    previous = {sig: signal.signal(sig, on_signal) for sig in _HANDLED}
    atexit.register(teardown)
    try:
        yield up(paths, owner_pid=os.getpid(), nodes=nodes)
    finally:
        try:
            teardown()
        finally:
            atexit.unregister(teardown)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
