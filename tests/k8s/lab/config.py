"""Versions, ports and paths of the lab: one place to read or change them.

Everything the lab builds lives outside the clone, in the user's cache directory, keyed by the
Kubernetes version, so that every clone and every session on a machine shares one build:

    ${XDG_CACHE_HOME:-$HOME/.cache}/howfast/k8s-lab/
        go/mod, go/build                 Go module and build caches (only needed to rebuild)
        k8s-1.34.4/
            bin/                         kube-apiserver ... kubectl, kube-proxy, coredns,
                                         local-path-provisioner, lo-only (unused), pause
            images/                      pause.tar, pgfio.tar (docker-archive tarballs) + stamps
            pki/                         CA, certificates, kubeconfigs
            gomod/                       the wrapper Go module that builds Kubernetes
            logs/                        build logs; last-run/ keeps the logs of the last cluster
            run/                         everything of a running cluster (removed by `down`);
                                         run/node2/ the second node's containerd and kubelet
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

K8S_VERSION = "1.34.4"
LOCAL_PATH_PROVISIONER_VERSION = "v0.0.30"
# The CloudNativePG operator (cnpg.py): built from its Go module, installed on demand.
CNPG_VERSION = "1.27.1"
CNPG_MODULE = "github.com/cloudnative-pg/cloudnative-pg"
CNPG_IMAGE = f"localhost/cnpg-operator:{CNPG_VERSION}"
CNPG_NAMESPACE = "cnpg-system"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"

# Debian packages the lab runs with (containerd 1.6, runc 1.1, etcd 3.4, CNI plugins) or
# builds with (debootstrap, openssl). The Kubernetes binaries come from Go source.
HOST_PACKAGES = (
    "containerd",
    "runc",
    "etcd-server",
    "etcd-client",
    "containernetworking-plugins",
    "debootstrap",
    "openssl",
    "iptables",
    # `nft`: iptables-nft leaves the tables it created (empty) behind; `down` deletes those
    "nftables",
    # builds deploy/Dockerfile.howfast without a daemon (dockerfile_image.py)
    "buildah",
)
# What goes into the benchmark image (besides debootstrap's minbase).
IMAGE_PACKAGES = ("postgresql-15", "fio", "procps")
PG_IMAGE = "localhost/pgfio:15"
PAUSE_IMAGE = "localhost/pause:3.10"
# The image's postgres user: a fixed, non-root uid/gid like the official PostgreSQL images.
PG_UID = 999
PG_GID = 999
PG_BINDIR = "/usr/lib/postgresql/15/bin"

NODE_NAME = "localhost"
# The second node's name is an IPv4 loopback literal: the API server reaches kubelets by node
# name (--kubelet-preferred-address-types=Hostname), and an IP literal needs no resolver (a name
# like "node-b" would send a DNS query off the machine). Its kubelet listens on that address, on
# ports of its own, so that nothing it opens can be mistaken for the first node's.
NODE2_NAME = "127.0.0.2"
NODE2_ADDRESS = "127.0.0.2"
NODE2_KUBELET_PORT = 10350
NODE2_HEALTHZ_PORT = 10348
NODE2_PORTS = (NODE2_KUBELET_PORT, NODE2_HEALTHZ_PORT)  # on NODE2_ADDRESS
# Two kubelets on one cgroup root take each other's pods for orphans and kill them: the second
# one gets a cgroup root of its own, made in every hierarchy by `up`, removed by `down`.
NODE2_CGROUP_ROOT = "howfast-lab-node2"
# `up` starts this many nodes unless told otherwise (--nodes, HOWFAST_K8S_LAB_NODES).
DEFAULT_NODES = 2
NODES_ENV = "HOWFAST_K8S_LAB_NODES"
BUILD_NICE_ENV = "HOWFAST_K8S_LAB_BUILD_NICE"
API_PORT = 6443
ETCD_CLIENT_PORT = 12379
ETCD_PEER_PORT = 12380
ETCD_METRICS_PORT = 12381
KUBELET_PORT = 10250
KUBELET_HEALTHZ_PORT = 10248
CONTROLLER_MANAGER_PORT = 10257
SCHEDULER_PORT = 10259
KUBE_PROXY_HEALTHZ_PORT = 10256
KUBE_PROXY_METRICS_PORT = 10249
PORTS = (
    ETCD_CLIENT_PORT,
    ETCD_PEER_PORT,
    ETCD_METRICS_PORT,
    KUBELET_PORT,
    KUBELET_HEALTHZ_PORT,
    CONTROLLER_MANAGER_PORT,
    SCHEDULER_PORT,
    KUBE_PROXY_HEALTHZ_PORT,
    KUBE_PROXY_METRICS_PORT,
)
# The cluster network (see README "The network"): every address in 198.18.0.0/15, the range
# RFC 2544 reserves for benchmark tests, never a private range (10/8, 172.16/12, 192.168/16)
# that a real network of this machine might use. They exist only on the lab's bridges and in
# the pods' network namespaces; a blackhole route for the whole range keeps them from leaving.
LAB_RANGE = "198.18.0.0/15"
CLUSTER_CIDR = "198.18.0.0/16"  # pods: node N gets 198.18.(N-1).0/24 (node_subnet)
SERVICE_CIDR = "198.19.0.0/16"  # ClusterIPs (kube-proxy)
KUBERNETES_SERVICE_IP = "198.19.0.1"  # the first of SERVICE_CIDR: the `kubernetes` Service
DNS_SERVICE_IP = "198.19.0.10"  # the kube-dns Service in front of CoreDNS
CLUSTER_DOMAIN = "cluster.local"
# The API server listens on the first node's bridge address (pods reach it directly and
# through the `kubernetes` Service; the host through the same address).
API_ADDRESS = "198.18.0.1"
BRIDGE_PREFIX = "hflab-br"  # node N's bridge is hflab-brN; iptables matches "hflab-br+"
CNI_NETWORK = "howfast-lab"
COREDNS_VERSION = "1.15.0"
COREDNS_IMAGE = f"localhost/coredns:{COREDNS_VERSION}"
TMPFS_SIZE = "2g"

# StorageClasses the lab offers. Two are backed by a dynamic provisioner on different storage;
# one has no provisioner at all, so that its claims stay Pending.
SC_DISK = "lab-disk"
SC_TMPFS = "lab-tmpfs"
SC_NONE = "lab-no-provisioner"
# Volumes both nodes can mount: a directory on the host that every kubelet of this one machine
# reaches, which is how the lab emulates network storage (NFS, CephFS...). Its volumes have no
# node affinity, so a pod can be recreated on the other node with its data.
SC_SHARED = "lab-shared"
# Volumes on a block device of their own (a loop device on an image file, loopdisk.py): the
# WAL volume of lab/pg is read apart from its data volume by per-device counters.
SC_WAL = "lab-wal"
PROVISIONER_DISK = "lab.howfast/disk"
PROVISIONER_TMPFS = "lab.howfast/tmpfs"
PROVISIONER_SHARED = "lab.howfast/shared"
PROVISIONER_WAL = "lab.howfast/wal"
PROVISIONER_NONE = "kubernetes.io/no-provisioner"

# Host sysctls the kubelet (and the pod network) set; `up` records them and `down` restores them.
WATCHED_SYSCTLS = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
    # the pod network's: up turns ip_forward on (podnet.py); kube-proxy is told to leave the
    # others alone, and they are watched in case it does not
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.route_localnet",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
)
# Host paths the runtime components create on their own (hard-coded in them); `up` records which
# are absent and `down` removes exactly those.
HOST_PATHS_CREATED = (
    "/run/containerd",
    "/run/netns",
    "/var/run/netns",
    "/var/lib/cni",
    "/var/log/containers",
    "/var/log/pods",
    "/var/lib/kubelet",
    "/etc/kubernetes",
)

LAB_DIR = Path(__file__).resolve().parent
GO_SOURCES = LAB_DIR / "go"


def node_suffix(index: int) -> str:
    """Appended to the names of a node's processes in the state file ("kubelet", "kubelet-2")."""
    return "" if index == 1 else f"-{index}"


def build_nice() -> list[str]:
    """The prefix that runs a build command at the build's priority: `nice -n 10` (a build
    shares the machine), else $HOWFAST_K8S_LAB_BUILD_NICE's increment. scripts/test.sh sets
    it to 0: there the build is the critical path of a fresh `make test`, run before the tests
    at their priority; at nice 10 beside two busy loops it got about a tenth of the CPU."""
    value = os.environ.get(BUILD_NICE_ENV, "").strip()
    increment = int(value) if value.lstrip("-").isdigit() else 10
    return ["nice", "-n", str(increment)]


def default_nodes() -> int:
    """How many nodes `up` starts when not told: $HOWFAST_K8S_LAB_NODES, else DEFAULT_NODES."""
    value = os.environ.get(NODES_ENV, "").strip()
    return int(value) if value.isdigit() else DEFAULT_NODES


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "howfast" / "k8s-lab"


@dataclass(frozen=True)
class Paths:
    """Where each part of the lab lives; derived from one root."""

    root: Path

    @classmethod
    def default(cls) -> Paths:
        override = os.environ.get("HOWFAST_K8S_LAB_DIR")
        root = Path(override) if override else cache_root() / f"k8s-{K8S_VERSION}"
        return cls(root)

    @property
    def go_root(self) -> Path:
        return self.root.parent / "go"

    @property
    def gomodcache(self) -> Path:
        return self.go_root / "mod"

    @property
    def gocache(self) -> Path:
        return self.go_root / "build"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def images(self) -> Path:
        return self.root / "images"

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def gomod(self) -> Path:
        return self.root / "gomod"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def state_file(self) -> Path:
        return self.run / "state.json"

    @property
    def kubeconfigs(self) -> Path:
        """Written by each `up` (they name the API server's address); pki/ keeps the keys."""
        return self.run / "kubeconfig"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.kubeconfigs / "admin.kubeconfig"

    @property
    def kubectl(self) -> Path:
        return self.bin / "kubectl"

    @property
    def containerd_sock(self) -> Path:
        return self.run / "containerd" / "containerd.sock"

    @property
    def disk_volumes(self) -> Path:
        return self.run / "volumes-disk"

    @property
    def tmpfs_volumes(self) -> Path:
        return self.run / "volumes-tmpfs"

    @property
    def shared_volumes(self) -> Path:
        return self.run / "volumes-shared"

    @property
    def wal_disk(self) -> Path:
        """The mount point of the lab's own block device (loopdisk.py)."""
        return self.run / "wal-disk"

    @property
    def wal_volumes(self) -> Path:
        # below the mount point, beside ext4's lost+found
        return self.wal_disk / "volumes"

    def node(self, index: int) -> NodeSpec:
        """The first node (index 1) keeps the lab's original layout directly under run/; the
        second has the same layout under run/node2/."""
        if index == 1:
            return NodeSpec(
                index=1,
                name=NODE_NAME,
                address="127.0.0.1",
                kubelet_port=KUBELET_PORT,
                healthz_port=KUBELET_HEALTHZ_PORT,
                dir=self.run,
                cgroup_root=None,
                pki_prefix="kubelet",
                pki=self.pki,
                kubeconfig_dir=self.kubeconfigs,
            )
        if index == 2:
            return NodeSpec(
                index=2,
                name=NODE2_NAME,
                address=NODE2_ADDRESS,
                kubelet_port=NODE2_KUBELET_PORT,
                healthz_port=NODE2_HEALTHZ_PORT,
                dir=self.run / "node2",
                cgroup_root=NODE2_CGROUP_ROOT,
                pki_prefix="node2-kubelet",
                pki=self.pki,
                kubeconfig_dir=self.kubeconfigs,
            )
        raise ValueError(f"the lab has nodes 1 and 2, not {index}")


@dataclass(frozen=True)
class NodeSpec:
    """One node of the lab: its kubelet and its own containerd, and where each keeps its files."""

    index: int
    name: str
    address: str  # where its kubelet listens (and what the API server dials: see NODE2_NAME)
    kubelet_port: int
    healthz_port: int
    dir: Path  # containerd/, kubelet/, pod-logs/, runc/ are below it
    cgroup_root: str | None  # None: the hierarchies' root, as a lone kubelet has it
    pki_prefix: str  # <prefix>-client.crt, <prefix>-serving.crt, <prefix>.kubeconfig
    pki: Path
    kubeconfig_dir: Path

    @property
    def suffix(self) -> str:
        return node_suffix(self.index)

    @property
    def containerd_dir(self) -> Path:
        return self.dir / "containerd"

    @property
    def containerd_sock(self) -> Path:
        return self.containerd_dir / "containerd.sock"

    @property
    def kubelet_dir(self) -> Path:
        return self.dir / "kubelet"

    @property
    def kubelet_root(self) -> Path:
        return self.kubelet_dir / "root"

    @property
    def pod_logs(self) -> Path:
        return self.dir / "pod-logs"

    @property
    def runc_root(self) -> Path:
        return self.dir / "runc"

    @property
    def kubeconfig(self) -> Path:
        return self.kubeconfig_dir / f"{self.pki_prefix}.kubeconfig"

    @property
    def bridge(self) -> str:
        return f"{BRIDGE_PREFIX}{self.index}"

    @property
    def subnet(self) -> str:
        """The node's pod subnet: 198.18.(index-1).0/24."""
        return f"198.18.{self.index - 1}.0/24"

    @property
    def gateway(self) -> str:
        """The bridge's address: the pods' gateway (and for the first node the API server's)."""
        return f"198.18.{self.index - 1}.1"

    @property
    def cni_conf_dir(self) -> Path:
        return self.dir / "cni-conf"

    @property
    def client_cert(self) -> str:
        return f"{self.pki_prefix}-client"

    @property
    def serving_cert(self) -> str:
        return f"{self.pki_prefix}-serving"


K8S_BINARIES = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kubectl",
    "kube-proxy",
)
