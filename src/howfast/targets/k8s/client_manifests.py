"""The client pod of a `k8s://` target (`--client pod`, the default): where pgbench and the
round-trip probe run, apart from the server, as the studies' pgbench Jobs did. Pure, like
manifests.py.

    Pod  howfast-T-client   one container, tools (the run's image: pgbench), its work
                            directories in memory, PGPASSWORD from the run's Secret,
                            PGCONNECT_TIMEOUT

`--client-node NODE` pins it to NODE; otherwise it prefers another node than the primary's.
Nodes that a drain event will empty are excluded. It reaches the primary at the address of
network.py (a DNS name in pod mode, 127.0.0.1 and a port in the lab's host mode).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from howfast.hosts.pod import PodDescription
from howfast.model import JSONValue
from howfast.targets.base import Connection
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s import network as net
from howfast.targets.k8s.manifests import container_security, pod_security
from howfast.targets.k8s.spec import K8sClient

Placement = K8sClient
DATABASE = "postgres"
# libpq's connect_timeout for every tool in the client pod (PGCONNECT_TIMEOUT): long enough for
# a loaded server to fork and authenticate, short against a SYN that nothing answers.
CONNECT_TIMEOUT_S = "5"


def client_pod_name(run: m.Plan) -> str:
    return f"{run.name}-client"


def affinity(token: str, node: str | None, avoid: Sequence[str]) -> dict[str, Any]:
    """Required: on `node` if given, never on `avoid`; preferred: not on the primary's node
    (unless pinned: then the user chose)."""
    if node is not None and node in avoid:
        raise ValueError(f"the client cannot be pinned to {node}: a drain event empties it")
    out: dict[str, Any] = {}
    required = net.required_node(node, avoid)
    if required is not None:
        out["nodeAffinity"] = required
    if node is None:
        out["podAntiAffinity"] = net.preferred_apart(
            {m.RUN_LABEL: token, net.ROLE_LABEL: "primary"}
        )
    return out


def client_pod(
    run: m.Plan,
    mode: net.NetworkMode,
    owner: Mapping[str, str] | None,
    *,
    node: str | None = None,
    avoid: Sequence[str] = (),
) -> dict[str, Any]:
    options = run.options
    tools: dict[str, Any] = {
        "name": m.TOOLS,
        "image": options.image,
        "command": ["/bin/sh", "-c", m.IDLE_SCRIPT],
        "securityContext": container_security(),
        # the password from the Secret: PodHost never sends it (hosts/pod.py SECRET_NAMES)
        "env": [
            {
                "name": "PGPASSWORD",
                "valueFrom": {"secretKeyRef": {"name": run.name, "key": m.PASSWORD_KEY}},
            },
            # A server pod made again (delete-pod, move, drain) leaves its old address in
            # DNS for a moment; a connection attempt to it can get no answer at all (the
            # neighbour entries of the vanished pod still look valid) and would wait for
            # minutes of SYN retries. Give up after this long: the load retries at once.
            {"name": "PGCONNECT_TIMEOUT", "value": CONNECT_TIMEOUT_S},
        ],
        "volumeMounts": [{"name": "work", "mountPath": m.WORK_MOUNT}],
    }
    if options.pull_policy:
        tools["imagePullPolicy"] = options.pull_policy
    meta: dict[str, Any] = {
        "name": client_pod_name(run),
        "namespace": run.namespace,
        "labels": m.labels(run.token),
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Secret", "name": owner["name"], "uid": owner["uid"]}
        ]
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 10,
        "securityContext": pod_security(),
        "containers": [tools],
        "volumes": [{"name": "work", "emptyDir": {"medium": "Memory", "sizeLimit": m.WORK_LIMIT}}],
        "affinity": affinity(run.token, node, avoid),
    }
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    return net.place_pod(manifest, mode, "client")


def planned_client_pod(run: m.Plan) -> PodDescription:
    """The client pod as a host sees it: tools only, no server, no volume under test."""
    return PodDescription(
        context=run.options.context,
        namespace=run.namespace,
        pod=client_pod_name(run),
        tools_container=m.TOOLS,
        server_container=None,
        data_dir=m.PGDATA,
        work_dir=m.WORK_MOUNT,
        volume_root=m.MOUNT_ROOT,
        path_setup=m.PATH_SETUP,
        images={m.TOOLS: run.options.image},
    )


def client_connection(primary: net.ServerAddress, password: str | None) -> Connection:
    """How the client's tools reach the primary. The password stays in memory; in the pod
    the tools have it from the Secret."""
    if isinstance(primary.port, str):
        raise ValueError(f"the primary's port is not known yet ({primary.port})")
    return Connection(
        host=primary.host, port=primary.port, user=m.SUPERUSER, dbname=DATABASE, password=password
    )


def client_record(
    placement: Placement,
    mode: net.NetworkMode,
    address: net.ServerAddress,
    *,
    node: str | None,
    server_node: str | None,
) -> dict[str, JSONValue]:
    """The target record's `client`: where the client ran and how it reached the server.
    `same_node` is None when either node is not known."""
    same: bool | None = None
    network = net.network_label(mode) if placement == "pod" else "loopback in the server's pod"
    if node is not None and server_node is not None:
        same = node == server_node
    return {
        "placement": placement,
        "node": node,
        "server_node": server_node,
        "same_node": same,
        "address": address.text,
        "network": network,
    }
