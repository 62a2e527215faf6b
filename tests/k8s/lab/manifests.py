"""Configuration files and Kubernetes objects of the lab, built as data (pure functions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.k8s.lab import config
from tests.k8s.lab.config import NodeSpec, Paths

STORAGE_NAMESPACE = "lab-storage"
PROVISIONER_SA = "lab-provisioner"


def containerd_config(paths: Paths, node: NodeSpec) -> str:
    """Each node's containerd has its own root, state, opt, sockets and runc root, and its own
    CNI configuration (its bridge and subnet, podnet.cni_conflist); the plugins are shared."""
    r = paths.run
    c = node.containerd_dir
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{c}/root"
state = "{c}/state"
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp",
]
[grpc]
  address = "{node.containerd_sock}"
[ttrpc]
  address = "{node.containerd_sock}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{c}/opt"
[{cri}]
  sandbox_image = "{config.PAUSE_IMAGE}"
  disable_apparmor = true
  # root here may lack CAP_SYS_RESOURCE: a negative oom_score_adj (-998 for pod sandboxes)
  # then fails in runc ("can't get final child's PID from pipe: EOF").
  restrict_oom_score_adj = true
  # network namespaces are bind-mounted under our state dir, not /run/netns
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{node.runc_root}"
  [{cri}.cni]
    bin_dir = "{r}/cni-bin"
    conf_dir = "{node.cni_conf_dir}"
"""


def kubelet_config(paths: Paths, node: NodeSpec, cgroup_v1: bool) -> str:
    p = paths.pki
    doc: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node.address,
        "port": node.kubelet_port,
        "readOnlyPort": 0,
        "healthzBindAddress": node.address,
        "healthzPort": node.healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(p / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(p / f"{node.serving_cert}.crt"),
        "tlsPrivateKeyFile": str(p / f"{node.serving_cert}.key"),
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{node.containerd_sock}",
        "failSwapOn": False,
        "podLogsDir": str(node.pod_logs),
        "resolvConf": "/etc/resolv.conf",
        # ClusterFirst pods ask CoreDNS (the kube-dns Service), which answers the cluster's
        # zones only
        "clusterDNS": [config.DNS_SERVICE_IP],
        "clusterDomain": config.CLUSTER_DOMAIN,
        # The lab needs no KUBE-FIREWALL & co: leave the host's iptables alone.
        "makeIPTablesUtilChains": False,
        # Images are imported, never pulled: never garbage-collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "serializeImagePulls": False,
        "maxPods": 50,
    }
    if node.cgroup_root is not None:
        # Its pods' cgroups go below a root of its own (made beforehand in every hierarchy):
        # on a shared root each kubelet would kill the other's pods as orphans.
        doc["cgroupRoot"] = f"/{node.cgroup_root}"
    if cgroup_v1:
        doc["failCgroupV1"] = False  # 1.34 tolerates cgroup v1 when told to
    return json.dumps(doc, indent=2) + "\n"


def provisioner_config(volume_dir: Path, shared: bool = False) -> str:
    """Where a local-path-provisioner makes volumes. `shared`: the directory is reachable from
    every node (sharedFileSystemPath), so volumes get no node affinity and may be ReadWriteMany."""
    doc: dict[str, Any]
    if shared:
        doc = {"sharedFileSystemPath": str(volume_dir)}
    else:
        doc = {
            "nodePathMap": [
                {"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [str(volume_dir)]},
            ]
        }
    return json.dumps(doc) + "\n"


def helper_pod() -> str:
    """The pod template local-path-provisioner runs to create and delete volume directories."""
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "helper-pod"},
        "spec": {
            "automountServiceAccountToken": False,
            "dnsPolicy": "Default",
            "containers": [
                {
                    "name": "helper-pod",
                    "image": config.PG_IMAGE,
                    "imagePullPolicy": "Never",
                    "securityContext": {"runAsUser": 0, "runAsGroup": 0},
                }
            ],
        },
    }
    return json.dumps(doc) + "\n"


def _storage_class(
    name: str, provisioner: str, description: str, binding: str = "WaitForFirstConsumer"
) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/part-of": "howfast-k8s-lab"},
            "annotations": {"howfast.lab/description": description},
        },
        "provisioner": provisioner,
        "volumeBindingMode": binding,
        "reclaimPolicy": "Delete",
    }


def provisioner_configmap(name: str) -> dict[str, Any]:
    """Setup and teardown scripts the helper pod runs for each volume."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": STORAGE_NAMESPACE},
        "data": {
            "setup": '#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n',
            "teardown": '#!/bin/sh\nset -eu\nrm -rf "$VOL_DIR"\n',
        },
    }


def storage_objects() -> dict[str, Any]:
    """Namespace, service account, StorageClasses and provisioner ConfigMaps, as one List."""
    items: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": STORAGE_NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": PROVISIONER_SA, "namespace": STORAGE_NAMESPACE},
            "automountServiceAccountToken": False,
        },
        _storage_class(
            config.SC_DISK, config.PROVISIONER_DISK, "local-path-provisioner, directory on disk"
        ),
        _storage_class(
            config.SC_TMPFS, config.PROVISIONER_TMPFS, "local-path-provisioner, directory on tmpfs"
        ),
        {
            **_storage_class(config.SC_NONE, config.PROVISIONER_NONE, "no provisioner"),
            "reclaimPolicy": "Retain",
        },
        # Like network storage, its volumes exist before any pod uses them and are not tied
        # to a node: Immediate binding.
        _storage_class(
            config.SC_SHARED,
            config.PROVISIONER_SHARED,
            "local-path-provisioner, one host directory every node mounts: emulates network"
            " storage (no node affinity, ReadWriteMany allowed)",
            binding="Immediate",
        ),
        _storage_class(
            config.SC_WAL,
            config.PROVISIONER_WAL,
            "local-path-provisioner, directory on a block device of its own (a loop device)",
        ),
        provisioner_configmap(f"{config.SC_DISK}-config"),
        provisioner_configmap(f"{config.SC_TMPFS}-config"),
        provisioner_configmap(f"{config.SC_SHARED}-config"),
        provisioner_configmap(f"{config.SC_WAL}-config"),
    ]
    # The disk class is the default one, like local-path in most small clusters.
    items[2]["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] = "true"
    return {"apiVersion": "v1", "kind": "List", "items": items}
