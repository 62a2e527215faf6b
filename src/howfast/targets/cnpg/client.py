"""Where pgbench runs against a CloudNativePG cluster, and the objects howfast makes in the
cluster's namespace for it. Pure, like targets/k8s/manifests.py.

    Secret  howfast-T          the owner of the rest (its writer annotation: cleanup's
                               liveness); it holds no credential
    Pod     howfast-T-client   the cluster's own image, idle; pgbench and the round-trip
                               probe run in it by exec; PGPASSWORD from the cluster's secret
                               by reference (secretKeyRef), so that no password is copied

The client's node (the study's rule: never beside the server): --client-node / ?client_node=
when given; else a node with no instance of the cluster; else a standby's node, never the
primary's, and the run says so."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from howfast.errors import UsageError
from howfast.hosts.pod import PodDescription
from howfast.model import JSONValue
from howfast.targets.cnpg.discovery import ClusterLayout
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s import network as net
from howfast.targets.k8s.names import labels

DEFAULT_UID = 26  # the operator's default postgresUID/postgresGID (its images' postgres user)
ROLE_LABEL = "howfast.dev/role"


@dataclass(frozen=True)
class ClientNode:
    node: str
    why: str  # for people, and the record
    beside: str | None = None  # the instance that shares the node (a standby), if any


def choose_client_node(
    layout: ClusterLayout, schedulable: Sequence[str], asked: str | None
) -> ClientNode:
    """The client pod's node. UsageError when the only node is the primary's and no node
    was asked: the client would share the primary's CPU and network."""
    primary = layout.primary()
    holders = {i.node: i.name for i in layout.instances if i.node}
    if asked is not None:
        if asked not in schedulable:
            raise UsageError(
                f"--client-node {asked}: not a schedulable node "
                f"(the nodes: {', '.join(schedulable) or 'none'})"
            )
        beside = holders.get(asked)
        why = "asked (--client-node)"
        if asked == primary.node:
            why += f", beside the primary {primary.name}"
        return ClientNode(asked, why, beside)
    free = [n for n in schedulable if n not in holders]
    if free:
        return ClientNode(sorted(free)[0], "a node with no instance of the cluster")
    standbys = sorted(
        (i for i in layout.standbys() if i.node in schedulable and i.node != primary.node),
        key=lambda i: i.name,
    )
    if standbys:
        standby = standbys[0]
        assert standby.node is not None
        return ClientNode(
            standby.node,
            f"every node holds an instance: beside the standby {standby.name}, never the "
            "primary's node",
            standby.name,
        )
    raise UsageError(
        f"Cluster {layout.name}: every schedulable node is the primary's ({primary.node}): "
        "the client would run beside the server",
        "give --client-node NODE to accept it",
    )


def owner_name(token: str) -> str:
    return f"howfast-{token}"


def client_pod_name(token: str) -> str:
    return f"howfast-{token}-client"


def owner_secret(token: str, namespace: str, target: str, writer: str) -> dict[str, Any]:
    """The owner of the run's objects: deleting it removes them (the garbage collector)."""
    annotations = {m.TARGET_ANNOTATION: target}
    if writer:
        annotations[m.WRITER_ANNOTATION] = writer
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": owner_name(token),
            "namespace": namespace,
            "labels": labels(token),
            "annotations": annotations,
        },
        "type": "Opaque",
    }


def _uid(cluster: Mapping[str, Any], key: str) -> int:
    value = (cluster.get("spec") or {}).get(key)
    return value if isinstance(value, int) and value > 0 else DEFAULT_UID


@dataclass(frozen=True)
class ClientPlan:
    token: str
    namespace: str
    image: str
    secret: str  # the cluster's secret the password comes from
    node: str | None  # None: --dry-run, the node not chosen yet
    uid: int = DEFAULT_UID
    gid: int = DEFAULT_UID
    pull_policy: str | None = None
    context: str | None = None


def client_plan(
    cluster: Mapping[str, Any],
    layout: ClusterLayout,
    *,
    token: str,
    secret: str,
    node: str | None,
    pull_policy: str | None = None,
    context: str | None = None,
) -> ClientPlan:
    if not layout.image:
        raise UsageError(f"Cluster {layout.name}: no image in its spec or status")
    return ClientPlan(
        token=token,
        namespace=layout.namespace,
        image=layout.image,
        secret=secret,
        node=node,
        uid=_uid(cluster, "postgresUID"),
        gid=_uid(cluster, "postgresGID"),
        # the cluster's own policy unless the run says (HOWFAST_K8S_PULL_POLICY)
        pull_policy=pull_policy or (cluster.get("spec") or {}).get("imagePullPolicy"),
        context=context,
    )


def client_pod(plan: ClientPlan, owner: Mapping[str, str] | None) -> dict[str, Any]:
    tools: dict[str, Any] = {
        "name": m.TOOLS,
        "image": plan.image,
        "command": ["/bin/sh", "-c", m.IDLE_SCRIPT],
        "securityContext": m.container_security(),
        # by reference: the password is never copied (hosts/pod.py SECRET_NAMES)
        "env": [
            {
                "name": "PGPASSWORD",
                "valueFrom": {"secretKeyRef": {"name": plan.secret, "key": "password"}},
            }
        ],
        "volumeMounts": [{"name": "work", "mountPath": m.WORK_MOUNT}],
    }
    if plan.pull_policy:
        tools["imagePullPolicy"] = plan.pull_policy
    meta: dict[str, Any] = {
        "name": client_pod_name(plan.token),
        "namespace": plan.namespace,
        "labels": {**labels(plan.token), ROLE_LABEL: "client"},
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
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": plan.uid,
            "runAsGroup": plan.gid,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [tools],
        "volumes": [{"name": "work", "emptyDir": {"medium": "Memory", "sizeLimit": m.WORK_LIMIT}}],
    }
    required = net.required_node(plan.node)
    if required is not None:
        spec["affinity"] = {"nodeAffinity": required}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def client_description(plan: ClientPlan) -> PodDescription:
    """The client pod as a host sees it: tools only, no server, no volume under test."""
    return PodDescription(
        context=plan.context,
        namespace=plan.namespace,
        pod=client_pod_name(plan.token),
        tools_container=m.TOOLS,
        server_container=None,
        data_dir=m.PGDATA,
        work_dir=m.WORK_MOUNT,
        volume_root=m.MOUNT_ROOT,
        path_setup=m.PATH_SETUP,
        images={m.TOOLS: plan.image},
    )


def rw_address(layout: ClusterLayout) -> str:
    """The -rw Service's name in the cluster's DNS: the load follows the primary through it."""
    return f"{layout.rw_service}.{layout.namespace}.svc"


def client_record(node: ClientNode | None, layout: ClusterLayout | None) -> dict[str, JSONValue]:
    """The target record's `client`: where the client ran and how it reached the primary
    ({} before start)."""
    if node is None or layout is None:
        return {}
    primary = layout.instance(layout.current_primary)
    return {
        "placement": "pod",
        "node": node.node,
        "server_node": None if primary is None else primary.node,
        "same_node": primary is not None and primary.node == node.node,
        "address": f"{rw_address(layout)}:5432",
        "network": "the pod network, through the -rw Service",
        "why": node.why,
    }


def schedulable(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """The nodes a plain pod may go to: Ready, not cordoned, without a NoSchedule or
    NoExecute taint (the client pod tolerates none)."""
    out = []
    for node in nodes:
        spec = node.get("spec") or {}
        if spec.get("unschedulable"):
            continue
        if any(t.get("effect") in ("NoSchedule", "NoExecute") for t in spec.get("taints") or []):
            continue
        conditions = (node.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            continue
        out.append(str((node.get("metadata") or {}).get("name")))
    return sorted(out)
