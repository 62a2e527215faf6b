"""How the pods of one run reach each other: the network mode, the addresses servers are dialled
at, and the objects that go with them. Pure: the same functions build what --dry-run prints
and what is created.

Two modes:

- **pod** (the default, on real clusters and on the test lab): every pod in its own network
  namespace, as usual. The servers listen on all addresses (standbys at SERVER_PORT, the
  primary at the run's port: primary_address) and are dialled by stable DNS names,
  `<hostname>.howfast-<token>`, which a headless Service of that name gives pods that carry
  `hostname` and `subdomain` (a recreated pod keeps its name): the client pod and the standbys
  (pg_basebackup, primary_conninfo) dial `primary.howfast-<token>`. It needs what every real
  cluster has: a pod network and cluster DNS. The test lab has both (tests/k8s/lab: a CNI
  bridge per node, kube-proxy, CoreDNS, all in 198.18.0.0/15 on the machine itself). A
  NetworkPolicy lets only the run's own pods reach the servers' port (where the network plugin
  enforces policies; the lab's bridge does not); the password (scram-sha-256) guards it as
  well.
- **host** (HOWFAST_K8S_NETWORK=host, test clusters only): every pod of the run shares its
  node's network and the servers listen on 127.0.0.1 at ports chosen free on this machine
  (for a cluster whose nodes are this machine, so that howfast's own SQL dials them directly,
  without a port-forward). Kept for clusters without a pod network or DNS; the lab no longer
  needs it. hostNetwork breaks the baseline and restricted Pod Security Standards: this mode
  is refused in a namespace that enforces either (`pod_security_refusal`).

The labels here are added to howfast's usual two (manifests.labels), so `howfast cleanup`
finds every object by the run label as before.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from howfast.errors import UsageError
from howfast.targets.k8s import names as m

NetworkMode = Literal["pod", "host"]
Role = Literal["primary", "standby", "client"]

NETWORK_ENV = "HOWFAST_K8S_NETWORK"
NETWORK_MODES: tuple[NetworkMode, ...] = ("pod", "host")
ROLE_LABEL = "howfast.dev/role"
SERVER_LABEL = "howfast.dev/server"  # "true" on primary and standby pods: the Service's selector
SERVER_PORT = 5432  # pod mode: every server has a network namespace of its own
PRIMARY_HOSTNAME = "primary"
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
HOST_NETWORK_REFUSED_BY = ("baseline", "restricted")
HBA_KEY = "pg_hba.conf"  # the ConfigMap key of the server's pg_hba.conf (setting hba_file)


def network_mode(environ: Mapping[str, str]) -> NetworkMode:
    """The mode from HOWFAST_K8S_NETWORK (absent or empty: pod)."""
    value = environ.get(NETWORK_ENV, "") or "pod"
    if value == "pod":
        return "pod"
    if value == "host":
        return "host"
    raise UsageError(
        f"{NETWORK_ENV}={value!r}: give pod (the default) or host (a test lab without a pod "
        "network only)"
    )


def network_label(mode: NetworkMode) -> str:
    """How a record names the mode."""
    return "pod" if mode == "pod" else "host (lab)"


def pod_security_refusal(
    mode: NetworkMode, namespace: str, namespace_labels: Mapping[str, str]
) -> str | None:
    """Why the mode cannot run in the namespace (None: it can). hostNetwork is refused by
    the baseline and restricted standards' admission, so host mode would fail at the first
    pod; say it before anything is created."""
    level = namespace_labels.get(ENFORCE_LABEL)
    if mode != "host" or level not in HOST_NETWORK_REFUSED_BY:
        return None
    return (
        f"{NETWORK_ENV}=host puts the run's pods on their node's network (hostNetwork), which "
        f"namespace {namespace} refuses ({ENFORCE_LABEL}={level}); host mode is for a test lab "
        "without a pod network: use a namespace without enforcement there, or unset "
        f"{NETWORK_ENV} on a real cluster"
    )


def standby_hostname(index: int) -> str:
    """The DNS label of standby `index` (1-based): `standby-1` (underscores are not allowed
    in host names; PostgreSQL's application_name is `standby_1`)."""
    return f"standby-{index}"


@dataclass(frozen=True)
class ServerAddress:
    """What a client pod or a standby dials to reach one server."""

    host: str
    port: int | str  # a string only in a dry run ("PORT")

    @property
    def text(self) -> str:
        return f"{self.host}:{self.port}"


def server_address(
    plan_name: str, mode: NetworkMode, hostname: str, host_port: int | str
) -> ServerAddress:
    """pod: the name the headless Service gives the pod (found through the namespace's DNS
    search path, so the pods of the run dial it without the namespace); host: 127.0.0.1 and
    the server's own port on this machine."""
    if mode == "pod":
        return ServerAddress(f"{hostname}.{plan_name}", SERVER_PORT)
    return ServerAddress("127.0.0.1", host_port)


def primary_address(plan_name: str, mode: NetworkMode, port: int | str) -> ServerAddress:
    """Where the run's other pods dial the primary. Its port is the run's own in both modes,
    not SERVER_PORT: in pod mode the tools in its pod reach it at the 127.0.0.1:PORT howfast's
    port-forward listens on here (one Connection for both); in host mode PORT is free on
    this machine."""
    if mode == "pod":
        return ServerAddress(f"{PRIMARY_HOSTNAME}.{plan_name}", port)
    return ServerAddress("127.0.0.1", port)


def addresses(
    plan_name: str,
    mode: NetworkMode,
    standbys: int,
    host_ports: Mapping[str, int | str] | None = None,
) -> dict[str, ServerAddress]:
    """Every server of a run by its hostname: `primary`, `standby-1`, ... In host mode each
    needs its port on this machine (`host_ports[hostname]`; "PORT" placeholders when not
    given: a dry run)."""
    names = [PRIMARY_HOSTNAME] + [standby_hostname(i) for i in range(1, standbys + 1)]
    ports = dict(host_ports or {})
    out = {}
    for name in names:
        port = ports.get(
            name, "PORT" if name == PRIMARY_HOSTNAME else f"PORT_{name.upper().replace('-', '_')}"
        )
        out[name] = server_address(plan_name, mode, name, port)
    return out


def listen_port(mode: NetworkMode, host_port: int | str) -> int | str:
    """The port a server listens on in its pod."""
    return SERVER_PORT if mode == "pod" else host_port


def listen_settings(mode: NetworkMode, port: int | str, *, remote_clients: bool) -> dict[str, str]:
    """postgresql.conf settings for where a server listens: in pod mode on every address of
    its pod when other pods dial it (a client pod, standbys), else on 127.0.0.1 only."""
    listen = "*" if mode == "pod" and remote_clients else "127.0.0.1"
    return {
        "listen_addresses": listen,
        "port": str(port),
        "hba_file": f"{m.CONFIG_MOUNT}/{HBA_KEY}",
    }


def hba_text(mode: NetworkMode, *, remote_clients: bool) -> str:
    """The server's pg_hba.conf (hba_file, from its ConfigMap): the Unix socket in the pod's
    memory volume trusted (only the pod's containers reach it, as initdb's --auth-local=trust
    did), TCP always with the password; in pod mode with remote clients, the run's user from
    any address, for the client pod and the standbys (the NetworkPolicy narrows who can try)."""
    lines = [
        "# set by howfast",
        "local all all trust",
        "local replication all trust",
        f"host all {m.SUPERUSER} 127.0.0.1/32 scram-sha-256",
        f"host all {m.SUPERUSER} ::1/128 scram-sha-256",
        f"host replication {m.SUPERUSER} 127.0.0.1/32 scram-sha-256",
        f"host replication {m.SUPERUSER} ::1/128 scram-sha-256",
    ]
    if mode == "pod" and remote_clients:
        lines += [
            f"host all {m.SUPERUSER} all scram-sha-256",
            f"host replication {m.SUPERUSER} all scram-sha-256",
        ]
    return "\n".join(lines) + "\n"


def role_labels(token: str, role: Role) -> dict[str, str]:
    out = {**m.labels(token), ROLE_LABEL: role}
    if role != "client":
        out[SERVER_LABEL] = "true"
    return out


def place_pod(
    pod: Mapping[str, Any], mode: NetworkMode, role: Role, *, hostname: str | None = None
) -> dict[str, Any]:
    """A copy of a pod manifest with its role's labels and its network: in pod mode a server
    gets `hostname` and `subdomain` (its DNS name); in host mode every pod gets its node's
    network (with the cluster's DNS kept, as hostNetwork pods need it said)."""
    out = copy.deepcopy(dict(pod))
    token = out["metadata"]["labels"][m.RUN_LABEL]
    out["metadata"]["labels"] = {**out["metadata"]["labels"], **role_labels(token, role)}
    spec = out["spec"]
    if mode == "host":
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    elif role != "client":
        if hostname is None:
            raise ValueError("a server pod in pod mode needs its hostname")
        spec["hostname"] = hostname
        spec["subdomain"] = f"howfast-{token}"
    return out


def _meta(token: str, namespace: str, owner: Mapping[str, str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"howfast-{token}",
        "namespace": namespace,
        "labels": m.labels(token),
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Secret", "name": owner["name"], "uid": owner["uid"]}
        ]
    return meta


def _servers(token: str) -> dict[str, str]:
    return {m.RUN_LABEL: token, SERVER_LABEL: "true"}


def headless_service(token: str, namespace: str, owner: Mapping[str, str] | None) -> dict[str, Any]:
    """Pod mode only: the Service whose name is the servers' subdomain, so that each server
    pod is `<hostname>.howfast-<token>` in DNS. Headless (no virtual IP, no proxy: the
    client reaches the pod itself) and publishing pods before they are Ready (a standby
    resolves the primary while it starts; a recreated pod keeps its name)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(token, namespace, owner),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": _servers(token),  # no ports: names only (the primary's is the run's)
        },
    }


def network_policy(token: str, namespace: str, owner: Mapping[str, str] | None) -> dict[str, Any]:
    """Pod mode only: the servers accept connections on their port from the run's own pods
    (client, standbys) and from nowhere else. Exec, logs and port-forward go through the
    kubelet, not the pod network, and are not affected."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(token, namespace, owner),
        "spec": {
            "podSelector": {"matchLabels": _servers(token)},
            "policyTypes": ["Ingress"],
            "ingress": [
                # any port: the primary listens on the run's own (primary_address), the
                # standbys on SERVER_PORT, and nothing else listens in these pods
                {"from": [{"podSelector": {"matchLabels": {m.RUN_LABEL: token}}}]}
            ],
        },
    }


def network_objects(
    token: str, namespace: str, mode: NetworkMode, owner: Mapping[str, str] | None
) -> list[dict[str, Any]]:
    """The run's network objects, in creation order (none in host mode)."""
    if mode == "host":
        return []
    return [headless_service(token, namespace, owner), network_policy(token, namespace, owner)]


def required_node(node: str | None, avoid: Sequence[str] = ()) -> dict[str, Any] | None:
    """Node affinity that pins a pod to `node` and keeps it off `avoid` (nodes a drain event
    empties), through the scheduler (so WaitForFirstConsumer volumes bind there)."""
    fields = []
    if node:
        fields.append({"key": "metadata.name", "operator": "In", "values": [node]})
    if avoid:
        fields.append({"key": "metadata.name", "operator": "NotIn", "values": list(avoid)})
    if not fields:
        return None
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": fields}]
        }
    }


def preferred_apart(selector: Mapping[str, str]) -> dict[str, Any]:
    """Pod anti-affinity, preferred: on another node than the pods `selector` matches, when
    the cluster has one (a one-node cluster still schedules the pod)."""
    return {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": dict(selector)},
                    "topologyKey": "kubernetes.io/hostname",
                },
            }
        ]
    }
