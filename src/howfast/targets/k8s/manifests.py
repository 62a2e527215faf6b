"""Every object a Kubernetes target creates, built as plain dicts. Pure: the same functions
build what --dry-run prints and what is created.

One run of one target is a set of objects sharing the label `howfast.dev/run=<token>`:

    Secret     howfast-<token>        created first, the owner of the rest; holds the password
    ConfigMap  howfast-<token>        the start script and postgresql.conf settings
    PVC        howfast-<token>-data   a volume of the class under test (unless emptyDir)
    PVC        howfast-<token>-wal    ?wal=CLASS: WAL on a volume of another class
    Pod        howfast-<token>        containers: postgres (the server; --cpu/--memory),
                                      tools (pgbench, pg_test_fsync), fio (when its image differs)

Every object carries `app.kubernetes.io/managed-by=howfast` and the run label; all but the
Secret have an ownerReference to it, so that deleting the Secret lets the garbage collector
remove the rest. The pod passes the "restricted" Pod Security Standard: non-root (the
image's postgres user, uid 999), seccomp RuntimeDefault, every capability dropped, no privilege
escalation, no host namespaces; PostgreSQL listens on 127.0.0.1 inside the pod only.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from howfast.targets.k8s import network as net
from howfast.targets.k8s.names import CONFIG_MOUNT as CONFIG_MOUNT
from howfast.targets.k8s.names import MANAGED_BY as MANAGED_BY
from howfast.targets.k8s.names import MANAGER as MANAGER
from howfast.targets.k8s.names import RUN_LABEL as RUN_LABEL
from howfast.targets.k8s.names import SUPERUSER as SUPERUSER
from howfast.targets.k8s.names import labels as labels
from howfast.targets.k8s.spec import (
    K8sOptions,
    K8sSpec,
    VolumeSpec,
    kube_quantity_bytes,
    parse_quantity_bytes,
)

TARGET_ANNOTATION = "howfast.dev/target"
WRITER_ANNOTATION = "howfast.dev/writer"  # the howfast process: host, boot id, PID (liveness)

PG_UID = 999  # the postgres user of the official image (and of deploy/Dockerfile's)
PASSWORD_KEY = "password"

MOUNT_ROOT = "/howfast"
DATA_MOUNT = f"{MOUNT_ROOT}/data"
WAL_MOUNT = f"{MOUNT_ROOT}/wal"
RUN_MOUNT = f"{MOUNT_ROOT}/run"  # the socket, the server log: memory, not the storage under test
WORK_MOUNT = f"{MOUNT_ROOT}/work"  # the tools' work directories: memory too
PGDATA = f"{DATA_MOUNT}/pgdata"
WAL_DIR = f"{WAL_MOUNT}/pg_wal"
SCRATCH = f"{DATA_MOUNT}/scratch"  # fio's and pg_test_fsync's files: on the data volume
SERVER_LOG = f"{RUN_MOUNT}/server.log"
WORK_LIMIT = "1Gi"
RUN_LIMIT = "64Mi"

POSTGRES = "postgres"
TOOLS = "tools"
FIO = "fio"

# PostgreSQL's programs are on the PATH of the official image; Debian-style images keep them
# in /usr/lib/postgresql/N/bin: the newest such directory joins the PATH.
PATH_SETUP = (
    'for d in /usr/lib/postgresql/*/bin; do [ -d "$d" ] && PG_BIN_DIR="$d"; done; '
    'PATH="$PATH${PG_BIN_DIR:+:$PG_BIN_DIR}"; export PATH'
)

START_SCRIPT = """#!/bin/sh
# PostgreSQL for howfast: initdb on the volume the first time, then the server under pg_ctl,
# so that howfast can restart it (per-step settings, cold reads) without a new container.
set -eu
{path_setup}
PGDATA={pgdata}; export PGDATA
if [ -n "${{HOWFAST_HOLD:-}}" ]; then  # made ahead: nothing on the volume until released
  trap 'exit 0' TERM INT
  while [ ! -e {release} ]; do sleep 0.1; done
  trap - TERM INT
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  umask 077
  printf '%s\\n' "$HOWFAST_PASSWORD" > {run}/pwfile
  initdb -D "$PGDATA" -U {user} --pwfile={run}/pwfile --auth-local=trust \\
    --auth-host=scram-sha-256 --encoding=UTF8 --locale=C {initdb_extra}>{run}/initdb.log 2>&1 \\
    || {{ cat {run}/initdb.log >&2; rm -f {run}/pwfile; exit 1; }}
  rm -f {run}/pwfile
  echo "include '{config}/postgresql.conf'" >> "$PGDATA/postgresql.conf"
fi
mkdir -p {scratch}
stop() {{ pg_ctl -D "$PGDATA" stop -m fast -w -t 60 || true; exit 0; }}
trap stop TERM INT
pg_ctl -D "$PGDATA" -l {log} -w -t 600 start || {{ tail -n 20 {log} >&2; exit 1; }}
while :; do sleep 1 & wait $! || true; done
"""

# The server of a pod made ahead (`held`) waits for this file before initdb: start() makes
# it once the run's previous target has stopped measuring.
RELEASE_FILE = f"{RUN_MOUNT}/release"
HOLD_VARIABLE = "HOWFAST_HOLD"

IDLE_SCRIPT = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"


def selector(token: str | None = None) -> str:
    """The label selector of one run's objects (or of every howfast object)."""
    base = f"{MANAGED_BY}={MANAGER}"
    return f"{base},{RUN_LABEL}={token}" if token else base


def base_settings(port: int | str) -> dict[str, str]:
    return {
        "listen_addresses": "127.0.0.1",  # inside the pod only
        "port": str(port),
        "unix_socket_directories": RUN_MOUNT,
        "log_checkpoints": "on",
        "log_line_prefix": "%m [%p] ",
        "log_timezone": "UTC",
        "logging_collector": "off",
    }


GIB = 2**30
SLOT_KEEP_SHARE = 0.25  # of the primary's volume: a dead standby cannot fill it


def standby_names(count: int) -> list[str]:
    """application_name and replication slot of each standby: standby_1, standby_2, ..."""
    return [f"standby_{i}" for i in range(1, count + 1)]


def replication_settings(spec: K8sSpec, volume_size: str) -> dict[str, str]:
    """The primary's settings for its standbys (none without): enough WAL senders and slots,
    a cap on the WAL a slot keeps (a quarter of the volume, at most 4 GiB), and the
    synchronous-commit design. The design is in the server's own configuration file from its
    first start, not set by ALTER SYSTEM once the standbys stream: a step's settings (ALTER
    SYSTEM, and RESET ALL when refused) and a recreated pod then keep it. Nothing commits
    before the standbys stream (a base backup and its slot are no transactions)."""
    if spec.replicas < 1:
        return {}
    senders = str(max(10, spec.replicas + 2))
    keep = min(4 * GIB, max(64 * 2**20, int(parse_quantity_bytes(volume_size) * SLOT_KEEP_SHARE)))
    out = {
        "wal_level": "replica",
        "max_wal_senders": senders,
        "max_replication_slots": senders,
        "max_slot_wal_keep_size": f"{keep // 2**20}MB",
    }
    if spec.sync != "off":  # off: asynchronous standbys, the primary's defaults
        names = ", ".join(standby_names(spec.replicas))
        out["synchronous_standby_names"] = f"FIRST {spec.replicas} ({names})"
        out["synchronous_commit"] = spec.sync
    return out


def conf_text(settings: Mapping[str, str]) -> str:
    out = ["# set by howfast"]
    for name, value in settings.items():
        quoted = value.replace("\\", "\\\\").replace("'", "''")
        out.append(f"{name} = '{quoted}'")
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class Plan:
    """Everything a target's manifests depend on."""

    token: str
    namespace: str
    spec: K8sSpec
    options: K8sOptions
    port: int | str  # the port PostgreSQL listens on in the pod (PORT before start)
    settings: Mapping[str, str] = field(default_factory=dict)
    server: bool = True  # False: a storage probe, tools only
    checksums: bool = False
    target_name: str = ""
    writer: str = ""  # JSON of the howfast process (liveness.Writer)
    network: net.NetworkMode = "pod"  # network.py: "host" only in a lab without a pod network
    remote_clients: bool = False  # other pods dial the server (standbys, a client pod)

    @property
    def name(self) -> str:
        return f"howfast-{self.token}"

    @property
    def data_claim(self) -> str | None:
        return f"{self.name}-data" if self.spec.data.storage_class else None

    @property
    def wal_claim(self) -> str | None:
        return f"{self.name}-wal" if self.spec.wal is not None and self.server else None


def _meta(plan: Plan, name: str, owner: Mapping[str, str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": plan.namespace, "labels": labels(plan.token)}
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Secret", "name": owner["name"], "uid": owner["uid"]}
        ]
    return meta


def owner_secret(plan: Plan, password: str) -> dict[str, Any]:
    """The owner of the run's objects, created first; holds the server's password."""
    meta = _meta(plan, plan.name, None)
    meta["annotations"] = {TARGET_ANNOTATION: plan.target_name or plan.spec.text}
    if plan.writer:
        meta["annotations"][WRITER_ANNOTATION] = plan.writer
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": "Opaque",
        "stringData": {PASSWORD_KEY: password},
    }


def config_map(plan: Plan, owner: Mapping[str, str] | None) -> dict[str, Any]:
    initdb_extra = ""
    if plan.checksums:
        initdb_extra += "--data-checksums "
    if plan.wal_claim:
        initdb_extra += f"--waldir={WAL_DIR} "
    script = START_SCRIPT.format(
        path_setup=PATH_SETUP,
        pgdata=PGDATA,
        run=RUN_MOUNT,
        release=RELEASE_FILE,
        user=SUPERUSER,
        initdb_extra=initdb_extra,
        config=CONFIG_MOUNT,
        scratch=SCRATCH,
        log=SERVER_LOG,
    )
    listen = net.listen_settings(plan.network, plan.port, remote_clients=plan.remote_clients)
    replication = replication_settings(plan.spec, plan.options.volume_size)
    settings = {**base_settings(plan.port), **replication, **plan.settings, **listen}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(plan, plan.name, owner),
        "data": {
            "start.sh": script,
            "postgresql.conf": conf_text(settings),
            net.HBA_KEY: net.hba_text(plan.network, remote_clients=plan.remote_clients),
        },
    }


def claim(
    plan: Plan, name: str, volume: VolumeSpec, owner: Mapping[str, str] | None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": volume.storage_class,
        "resources": {"requests": {"storage": plan.options.volume_size}},
    }
    if volume.attributes_class:
        spec["volumeAttributesClassName"] = volume.attributes_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _meta(plan, name, owner),
        "spec": spec,
    }


def claims(plan: Plan, owner: Mapping[str, str] | None) -> list[dict[str, Any]]:
    out = []
    if plan.data_claim:
        out.append(claim(plan, plan.data_claim, plan.spec.data, owner))
    if plan.wal_claim and plan.spec.wal is not None:
        out.append(claim(plan, plan.wal_claim, plan.spec.wal, owner))
    return out


def container_security() -> dict[str, Any]:
    """The restricted Pod Security Standard's container part (every pod howfast makes)."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
    }


def pod_security() -> dict[str, Any]:
    """The restricted standard's pod part: the image's postgres user, RuntimeDefault seccomp."""
    return {
        "runAsNonRoot": True,
        "runAsUser": PG_UID,
        "runAsGroup": PG_UID,
        "fsGroup": PG_UID,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _container(plan: Plan, name: str, image: str, command: list[str]) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "command": command,
        "securityContext": container_security(),
        "volumeMounts": [{"name": "data", "mountPath": DATA_MOUNT}],
    }
    if plan.options.pull_policy:
        container["imagePullPolicy"] = plan.options.pull_policy
    if plan.wal_claim:
        container["volumeMounts"].append({"name": "wal", "mountPath": WAL_MOUNT})
    return container


def _password_env(plan: Plan, variable: str) -> dict[str, Any]:
    return {
        "name": variable,
        "valueFrom": {"secretKeyRef": {"name": plan.name, "key": PASSWORD_KEY}},
    }


def server_resources(options: K8sOptions) -> dict[str, Any]:
    """--cpu and --memory: requests = limits, so the server gets what it is measured with."""
    amounts: dict[str, str] = {}
    if options.cpu:
        amounts["cpu"] = options.cpu
    if options.memory_bytes:
        amounts["memory"] = kube_quantity_bytes(options.memory_bytes)
    return {"requests": dict(amounts), "limits": dict(amounts)} if amounts else {}


def pod(plan: Plan, owner: Mapping[str, str] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 30,
        "securityContext": pod_security(),
        "containers": _pod_containers(plan),
        "volumes": _pod_volumes(plan),
    }
    if plan.options.node:  # through the scheduler, so that WaitForFirstConsumer volumes bind
        spec["affinity"] = _on_node(plan.options.node)
    meta = _meta(plan, plan.name, owner)
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if not plan.server:
        return manifest
    if plan.network == "pod" and not plan.remote_clients:  # alone: its labels, no DNS name
        meta["labels"] = net.role_labels(plan.token, "primary")
        return manifest
    return net.place_pod(manifest, plan.network, "primary", hostname=net.PRIMARY_HOSTNAME)


def held(pod_manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The server's pod made ahead of its start (issue 34: while the run's previous target
    measures): scheduled, its volumes provisioned and its containers started, but its server
    container waits for RELEASE_FILE before initdb, so that nothing is written on the node's
    disks or run in the pod until start() releases it. A copy: the manifest kept for
    recreating the pod (events) does not hold."""
    manifest = copy.deepcopy(dict(pod_manifest))
    for container in manifest["spec"]["containers"]:
        if container["name"] == POSTGRES:
            container.setdefault("env", []).append({"name": HOLD_VARIABLE, "value": "1"})
    return manifest


def _pod_containers(plan: Plan) -> list[dict[str, Any]]:
    """The server (with one), the tools, and fio when its image is another."""
    containers = [_server_container(plan)] if plan.server else []
    tools = _container(plan, TOOLS, plan.options.image, ["/bin/sh", "-c", IDLE_SCRIPT])
    tools["volumeMounts"].append({"name": "work", "mountPath": WORK_MOUNT})
    if plan.server:  # the tools connect with the password, from the Secret, never in argv
        tools["env"] = [_password_env(plan, "PGPASSWORD")]
    containers.append(tools)
    if plan.options.fio_image != plan.options.image:
        fio = _container(plan, FIO, plan.options.fio_image, ["/bin/sh", "-c", IDLE_SCRIPT])
        fio["volumeMounts"].append({"name": "work", "mountPath": WORK_MOUNT})
        containers.append(fio)
    return containers


def _server_container(plan: Plan) -> dict[str, Any]:
    server = _container(plan, POSTGRES, plan.options.image, ["/bin/sh", f"{CONFIG_MOUNT}/start.sh"])
    server["env"] = [_password_env(plan, "HOWFAST_PASSWORD")]
    server["volumeMounts"] += [
        {"name": "run", "mountPath": RUN_MOUNT},
        {"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True},
    ]
    server["readinessProbe"] = {
        "exec": {
            "command": [
                "/bin/sh",
                "-c",
                f"{PATH_SETUP}; pg_isready -q -h 127.0.0.1 -p {plan.port} -U {SUPERUSER}",
            ]
        },
        "periodSeconds": 2,
        "failureThreshold": 1,
    }
    resources = server_resources(plan.options)
    if resources:
        server["resources"] = resources
    return server


def _pod_volumes(plan: Plan) -> list[dict[str, Any]]:
    """The data (a claim, or an emptyDir), the work directory, the WAL's claim, and the
    server's run directory and configuration."""
    data: dict[str, Any] = {"name": "data"}
    if plan.data_claim:
        data["persistentVolumeClaim"] = {"claimName": plan.data_claim}
    else:
        empty: dict[str, Any] = {"sizeLimit": plan.options.volume_size}
        if plan.spec.data.medium:
            empty["medium"] = plan.spec.data.medium
        data["emptyDir"] = empty
    volumes: list[dict[str, Any]] = [
        data,
        {"name": "work", "emptyDir": {"medium": "Memory", "sizeLimit": WORK_LIMIT}},
    ]
    if plan.wal_claim:
        volumes.append({"name": "wal", "persistentVolumeClaim": {"claimName": plan.wal_claim}})
    if plan.server:
        volumes += [
            {"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": RUN_LIMIT}},
            {"name": "config", "configMap": {"name": plan.name, "defaultMode": 0o555}},
        ]
    return volumes


def _on_node(node: str) -> dict[str, Any]:
    """A required node affinity on the node's name."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


def dependents(plan: Plan, owner: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """Everything after the owner Secret, in creation order (the standbys come later, once
    the primary is Ready: standby_manifests.py)."""
    out: list[dict[str, Any]] = []
    if plan.server:
        out.append(config_map(plan, owner))
        if plan.remote_clients:
            out += net.network_objects(plan.token, plan.namespace, plan.network, owner)
    return out + claims(plan, owner) + [pod(plan, owner)]


def all_manifests(plan: Plan, password: str = "PASSWORD") -> list[dict[str, Any]]:
    """What --dry-run prints: the owner, then its dependents (ownerReferences need the
    owner's uid, known once it exists: UID here)."""
    owner = {"name": plan.name, "uid": "UID"}
    return [owner_secret(plan, password), *dependents(plan, owner)]
