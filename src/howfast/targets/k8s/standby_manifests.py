"""The objects of one standby of a `k8s://` target with replicas. Pure, like manifests.py.

Standby i (1-based) of run T, created after the primary is Ready:

    ConfigMap  howfast-T-standby-i        standby.sh, postgresql.conf, standby.conf, pg_hba.conf
    PVC        howfast-T-standby-i-data   a volume of ?standby_class=, else the primary's class
    PVC        howfast-T-standby-i-wal    ?wal=CLASS: its WAL on a volume of that class too
    Pod        howfast-T-standby-i        containers: postgres (standby.sh), tools (the samplers'
                                          execs: its node's /proc, its volume's device)

standby.sh, the first time (no PG_VERSION on the volume): pg_basebackup from the primary
(`-X stream -c fast -C -S standby_i`: WAL streamed during the copy, a replication slot so the
primary keeps what the standby has not received), standby.signal, and standby.conf appended to
postgresql.auto.conf (primary_conninfo, the slot, synchronous_standby_names='': a copied
ALTER SYSTEM value must not survive into a standby, which, promoted, would wait for itself).
Then, every time, the server under pg_ctl as the primary's start script does. The password is
never on the volume under test nor in an argv: libpq reads it from a pgpass file in the pod's
memory volume, written from the Secret at every start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from howfast.hosts.pod import PodDescription
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s import network as net
from howfast.targets.k8s.manifests import container_security, pod_security
from howfast.targets.k8s.spec import VolumeSpec

PASSFILE = f"{m.RUN_MOUNT}/pgpass"
STANDBY_LOG = f"{m.RUN_MOUNT}/server.log"

# Paths and names come from the environment (the manifest sets them), so that one text runs in
# the pod and, in the tests, against a local primary.
STANDBY_SCRIPT = r"""#!/bin/sh
# A standby for howfast: a base backup of the primary the first time, then the server under
# pg_ctl, streaming from the primary.
set -eu
@PATH_SETUP@
: "${PGDATA:?}" "${HOWFAST_RUN:?}" "${HOWFAST_CONFIG:?}" "${HOWFAST_PRIMARY:?}"
: "${HOWFAST_SLOT:?}" "${HOWFAST_USER:?}" "${HOWFAST_PASSWORD:?}"
export PGDATA
umask 077
# libpq's password file, in memory, rewritten at every start (a recreated pod has a new one)
escaped=$(printf '%s' "$HOWFAST_PASSWORD" | sed 's/[\\:]/\\&/g')
printf '*:*:*:%s:%s\n' "$HOWFAST_USER" "$escaped" > "$HOWFAST_RUN/pgpass"
unset escaped
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  set --
  if [ -n "${HOWFAST_WALDIR:-}" ]; then set -- "--waldir=$HOWFAST_WALDIR"; fi
  pg_basebackup -D "$PGDATA" -d "$HOWFAST_PRIMARY" -X stream -c fast -C -S "$HOWFAST_SLOT" \
    --no-password "$@" > "$HOWFAST_RUN/basebackup.log" 2>&1 \
    || { cat "$HOWFAST_RUN/basebackup.log" >&2; exit 1; }
  touch "$PGDATA/standby.signal"
  cat "$HOWFAST_CONFIG/standby.conf" >> "$PGDATA/postgresql.auto.conf"
fi
stop() { pg_ctl -D "$PGDATA" stop -m fast -w -t 60 || true; exit 0; }
trap stop TERM INT
pg_ctl -D "$PGDATA" -l "$HOWFAST_RUN/server.log" -w -t 600 start \
  || { tail -n 20 "$HOWFAST_RUN/server.log" >&2; exit 1; }
while :; do sleep 1 & wait $! || true; done
""".replace("@PATH_SETUP@", m.PATH_SETUP)


def standby_name(index: int) -> str:
    """application_name and replication slot of standby `index` (1-based): `standby_1`."""
    return f"standby_{index}"


def libpq_value(value: str | int) -> str:
    """A conninfo value, quoted when it needs to be (spaces, quotes, backslashes, empty)."""
    text = str(value)
    if text and not any(c in text for c in " '\\\t\n"):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def primary_conninfo(primary: net.ServerAddress, name: str, passfile: str) -> str:
    """How a standby reaches the primary, without the password (libpq reads `passfile`)."""
    parts = {
        "host": primary.host,
        "port": primary.port,
        "user": m.SUPERUSER,
        "application_name": name,
        "passfile": passfile,
    }
    return " ".join(f"{k}={libpq_value(v)}" for k, v in parts.items())


def standby_settings(
    name: str,
    primary: net.ServerAddress,
    *,
    port: int | str,
    listen: str,
    socket_dir: str,
    passfile: str,
) -> dict[str, str]:
    """standby.conf: appended to the copy's postgresql.auto.conf, so it wins over whatever the
    copy brought from the primary (its port, its ALTER SYSTEM values)."""
    return {
        "port": str(port),
        "listen_addresses": listen,
        "unix_socket_directories": socket_dir,
        "hot_standby": "on",
        "primary_conninfo": primary_conninfo(primary, name, passfile),
        "primary_slot_name": name,
        "synchronous_standby_names": "",
    }


@dataclass(frozen=True)
class StandbyPlan:
    """Everything one standby's objects depend on, beside the run's plan."""

    run: m.Plan  # the primary's plan: token, namespace, options, settings, volumes
    index: int  # 1-based
    mode: net.NetworkMode
    primary: net.ServerAddress  # where the standby dials the primary
    host_port: int | str = "PORT"  # host mode: the standby's port on this machine
    standby_class: str | None = None  # ?standby_class=; None: the primary's data volume kind
    remote_clients: bool = True  # listen beyond 127.0.0.1 in pod mode (it may be promoted)

    @property
    def name(self) -> str:
        return standby_name(self.index)

    @property
    def hostname(self) -> str:
        return net.standby_hostname(self.index)

    @property
    def pod_name(self) -> str:
        return f"{self.run.name}-{self.hostname}"

    @property
    def volume(self) -> VolumeSpec:
        if self.standby_class is not None:
            return VolumeSpec(self.standby_class)
        return self.run.spec.data

    @property
    def data_claim(self) -> str | None:
        return f"{self.pod_name}-data" if self.volume.storage_class else None

    @property
    def wal_claim(self) -> str | None:
        return f"{self.pod_name}-wal" if self.run.spec.wal is not None else None

    @property
    def port(self) -> int | str:
        return net.listen_port(self.mode, self.host_port)

    @property
    def address(self) -> net.ServerAddress:
        return net.server_address(self.run.name, self.mode, self.hostname, self.host_port)


def _meta(plan: StandbyPlan, owner: Mapping[str, str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": plan.pod_name,
        "namespace": plan.run.namespace,
        "labels": net.role_labels(plan.run.token, "standby"),
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Secret", "name": owner["name"], "uid": owner["uid"]}
        ]
    return meta


def config_map(plan: StandbyPlan, owner: Mapping[str, str] | None) -> dict[str, Any]:
    """postgresql.conf is what the copied data directory includes (the primary's start script
    appended `include '/etc/howfast/postgresql.conf'`): the run's settings, with where this
    server listens."""
    listen = net.listen_settings(plan.mode, plan.port, remote_clients=plan.remote_clients)
    settings = {**m.base_settings(plan.port), **plan.run.settings, **listen}
    block = standby_settings(
        plan.name,
        plan.primary,
        port=plan.port,
        listen=listen["listen_addresses"],
        socket_dir=m.RUN_MOUNT,
        passfile=PASSFILE,
    )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(plan, owner),
        "data": {
            "standby.sh": STANDBY_SCRIPT,
            "postgresql.conf": m.conf_text(settings),
            "standby.conf": m.conf_text(block),
            net.HBA_KEY: net.hba_text(plan.mode, remote_clients=plan.remote_clients),
        },
    }


def claims(plan: StandbyPlan, owner: Mapping[str, str] | None) -> list[dict[str, Any]]:
    out = []
    if plan.data_claim:
        out.append(m.claim(plan.run, plan.data_claim, plan.volume, owner))
    if plan.wal_claim and plan.run.spec.wal is not None:
        out.append(m.claim(plan.run, plan.wal_claim, plan.run.spec.wal, owner))
    for claim in out:  # the standby's role, beside the run label
        claim["metadata"]["labels"] = net.role_labels(plan.run.token, "standby")
    return out


def _env(plan: StandbyPlan) -> list[dict[str, Any]]:
    primary = primary_conninfo(plan.primary, plan.name, PASSFILE)
    values = {
        "PGDATA": m.PGDATA,
        "HOWFAST_RUN": m.RUN_MOUNT,
        "HOWFAST_CONFIG": m.CONFIG_MOUNT,
        "HOWFAST_PRIMARY": primary,
        "HOWFAST_SLOT": plan.name,
        "HOWFAST_USER": m.SUPERUSER,
    }
    if plan.wal_claim:
        values["HOWFAST_WALDIR"] = m.WAL_DIR
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in values.items()]
    env.append(
        {
            "name": "HOWFAST_PASSWORD",
            "valueFrom": {"secretKeyRef": {"name": plan.run.name, "key": m.PASSWORD_KEY}},
        }
    )
    return env


def _container(plan: StandbyPlan, name: str, command: list[str]) -> dict[str, Any]:
    options = plan.run.options
    container: dict[str, Any] = {
        "name": name,
        "image": options.image,
        "command": command,
        "securityContext": container_security(),
        "volumeMounts": [{"name": "data", "mountPath": m.DATA_MOUNT}],
    }
    if options.pull_policy:
        container["imagePullPolicy"] = options.pull_policy
    if plan.wal_claim:
        container["volumeMounts"].append({"name": "wal", "mountPath": m.WAL_MOUNT})
    return container


def pod(plan: StandbyPlan, owner: Mapping[str, str] | None) -> dict[str, Any]:
    server = _container(plan, m.POSTGRES, ["/bin/sh", f"{m.CONFIG_MOUNT}/standby.sh"])
    server["env"] = _env(plan)
    server["volumeMounts"] += [
        {"name": "run", "mountPath": m.RUN_MOUNT},
        {"name": "config", "mountPath": m.CONFIG_MOUNT, "readOnly": True},
    ]
    probe = f"{m.PATH_SETUP}; pg_isready -q -h 127.0.0.1 -p {plan.port} -U {m.SUPERUSER}"
    server["readinessProbe"] = {
        "exec": {"command": ["/bin/sh", "-c", probe]},
        "periodSeconds": 2,
        "failureThreshold": 1,
    }
    resources = m.server_resources(plan.run.options)  # a standby is the primary's size
    if resources:
        server["resources"] = resources
    tools = _container(plan, m.TOOLS, ["/bin/sh", "-c", m.IDLE_SCRIPT])
    tools["volumeMounts"].append({"name": "work", "mountPath": m.WORK_MOUNT})
    data: dict[str, Any] = {"name": "data"}
    if plan.data_claim:
        data["persistentVolumeClaim"] = {"claimName": plan.data_claim}
    else:
        empty: dict[str, Any] = {"sizeLimit": plan.run.options.volume_size}
        if plan.volume.medium:
            empty["medium"] = plan.volume.medium
        data["emptyDir"] = empty
    volumes: list[dict[str, Any]] = [
        data,
        {"name": "work", "emptyDir": {"medium": "Memory", "sizeLimit": m.WORK_LIMIT}},
        {"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": m.RUN_LIMIT}},
        {"name": "config", "configMap": {"name": plan.pod_name, "defaultMode": 0o555}},
    ]
    if plan.wal_claim:
        volumes.append({"name": "wal", "persistentVolumeClaim": {"claimName": plan.wal_claim}})
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 30,
        "securityContext": pod_security(),
        "containers": [server, tools],
        "volumes": volumes,
        # on another node than the run's other servers, when the cluster has one
        "affinity": {
            "podAntiAffinity": net.preferred_apart(
                {m.RUN_LABEL: plan.run.token, net.SERVER_LABEL: "true"}
            )
        },
    }
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(plan, owner), "spec": spec}
    return net.place_pod(manifest, plan.mode, "standby", hostname=plan.hostname)


def objects(plan: StandbyPlan, owner: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """The standby's objects in creation order."""
    return [config_map(plan, owner), *claims(plan, owner), pod(plan, owner)]


def planned_pod(plan: StandbyPlan) -> PodDescription:
    """The standby's pod as a host would see it (its node unknown until it runs)."""
    return PodDescription(
        context=plan.run.options.context,
        namespace=plan.run.namespace,
        pod=plan.pod_name,
        tools_container=m.TOOLS,
        server_container=m.POSTGRES,
        data_dir=m.PGDATA,
        work_dir=m.WORK_MOUNT,
        volume_root=m.MOUNT_ROOT,
        path_setup=m.PATH_SETUP,
        memory_limit_bytes=plan.run.options.memory_bytes,
        images={m.POSTGRES: plan.run.options.image, m.TOOLS: plan.run.options.image},
    )
