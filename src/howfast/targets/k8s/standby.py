"""The standby pods of a `k8s://CLASS?replicas=N` target, once they exist: made after the
primary is Ready (standby_manifests.py builds their objects), waited for until each one
streams and has replayed what the primary had written, and described for the target's record.
They carry the run's label: stopping the target (and `howfast cleanup`) deletes them with the
rest.

Waiting reads the primary's pg_stat_replication through howfast's own connection (the
port-forward): one query every 0.2 s, as the local standbys are waited for.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import psycopg

from howfast.cancel import NEVER, CancelToken
from howfast.errors import HowfastError
from howfast.model import JSONValue
from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s import standby_manifests as sm
from howfast.targets.k8s.cluster import Cluster

POLL_S = 0.2
STREAMING_TIMEOUT_S = 60.0
# One row per walsender; LSNs as bytes since 0/0.
STATE_QUERY = (
    "SELECT application_name, state, sync_state, "
    "pg_wal_lsn_diff(replay_lsn, '0/0')::bigint "
    "FROM pg_catalog.pg_stat_replication"
)


@dataclass(frozen=True)
class WalSender:
    """What the primary says of one standby now."""

    state: str  # startup, catchup, streaming...
    sync_state: str  # async, potential, sync, quorum
    replay_lsn: int | None


def read_senders(primary: Connection) -> tuple[dict[str, WalSender], int]:
    """The primary's walsenders by application_name, and its current WAL position."""
    try:
        with pgquery.connect(primary, timeout_s=5) as db:
            rows = db.execute(STATE_QUERY).fetchall()
            current = db.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"
            ).fetchone()
    except psycopg.Error as exc:
        raise HowfastError(f"reading pg_stat_replication on the primary: {exc}") from None
    senders = {
        str(row[0]): WalSender(
            str(row[1] or ""), str(row[2] or ""), None if row[3] is None else int(str(row[3]))
        )
        for row in rows
    }
    return senders, int(str(current[0])) if current else 0


def describe_sender(sender: WalSender | None) -> str:
    if sender is None:
        return "not connected to the primary"
    return f"{sender.state or 'unknown'} ({sender.sync_state or 'no sync state'})"


def expected_sync_state(sync: str) -> str:
    """pg_stat_replication.sync_state once the design is in force (FIRST N: all sync)."""
    return "async" if sync == "off" else "sync"


class PodStandby:
    """One standby pod of a run."""

    def __init__(self, plan: sm.StandbyPlan, cluster: Cluster) -> None:
        self.plan = plan
        self.cluster = cluster
        self.name = plan.name
        self.pod: dict[str, Any] | None = None
        self.node: dict[str, Any] | None = None

    def create(self, owner: Mapping[str, str]) -> None:
        for manifest in sm.objects(self.plan, owner):
            self.cluster.create(manifest)

    def wait_ready(self, timeout_s: float, cancel: CancelToken = NEVER) -> None:
        """Until its server accepts connections (the base backup is done); a base backup that
        fails ends the container, and the error quotes what pg_basebackup said."""
        claims = [c for c in (self.plan.data_claim, self.plan.wal_claim) if c]
        namespace = self.plan.run.namespace
        try:
            self.pod = self.cluster.wait_pod_ready(
                namespace, self.plan.pod_name, claims, timeout_s, cancel
            )
        except HowfastError as exc:
            raise HowfastError(f"{self.name} did not start: {exc}") from None
        node_name = (self.pod.get("spec") or {}).get("nodeName")
        self.node = self.cluster.read("Node", str(node_name)) if node_name else None

    @property
    def node_name(self) -> str | None:
        name = ((self.pod or {}).get("spec") or {}).get("nodeName")
        return str(name) if name else None

    def _sql(self, query: str) -> str | None:
        """One value from the standby itself, over its socket in its postgres container."""
        script = (
            f"{m.PATH_SETUP}; psql -h {m.RUN_MOUNT} -p {self.plan.port} -U {m.SUPERUSER} "
            f'-d postgres -AtX -c "{query}"'
        )
        out = self.cluster.exec(
            self.plan.run.namespace, self.plan.pod_name, m.POSTGRES, ["/bin/sh", "-c", script]
        )
        return (out.stdout.strip() or None) if out.returncode == 0 else None

    def log_tail(self, lines: int = 20) -> str | None:
        """Its server log's end (the base backup's words when it never started)."""
        namespace, pod = self.plan.run.namespace, self.plan.pod_name
        with contextlib.suppress(HowfastError):
            command = ["tail", "-n", str(lines), sm.STANDBY_LOG]
            out = self.cluster.exec(namespace, pod, m.POSTGRES, command)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.rstrip()
        found = self.cluster.read("Pod", pod, namespace) or {}
        logs = self.cluster.container_logs(namespace, pod, found)
        return "\n".join(logs) or None

    def record(self, sender: WalSender | None) -> dict[str, JSONValue]:
        """What the target's record says of it."""
        version = None
        with contextlib.suppress(HowfastError):
            version = self._sql("SHOW server_version")
        return {
            "name": self.name,
            "class": self.plan.volume.storage_class or self.plan.volume.describe,
            "pod": self.plan.pod_name,
            "node": self.node_name,
            "address": self.plan.address.text,
            "version": version,
            "state": sender.state if sender else None,
            "sync_state": sender.sync_state if sender else None,
        }


def wait_streaming(
    standbys: list[PodStandby],
    primary: Connection,
    sync: str,
    timeout_s: float = STREAMING_TIMEOUT_S,
    cancel: CancelToken = NEVER,
) -> dict[str, WalSender]:
    """Until every standby streams, has replayed the WAL the primary had written once all
    were streaming, and shows the design's sync state. On time-out: the first standby that is
    not there, what the primary says of it, and its log's last lines."""
    deadline = time.monotonic() + timeout_s
    target_lsn: int | None = None
    wanted = expected_sync_state(sync)
    senders: dict[str, WalSender] = {}
    while True:
        cancel.raise_if_cancelled()
        senders, current = read_senders(primary)
        streaming = all(
            (s := senders.get(standby.name)) is not None and s.state == "streaming"
            for standby in standbys
        )
        if streaming and target_lsn is None:
            target_lsn = current
        if target_lsn is not None and all(
            (s := senders.get(standby.name)) is not None
            and s.replay_lsn is not None
            and s.replay_lsn >= target_lsn
            and s.sync_state == wanted
            for standby in standbys
        ):
            return senders
        if time.monotonic() > deadline:
            late = next(
                standby
                for standby in standbys
                if (s := senders.get(standby.name)) is None
                or s.state != "streaming"
                or s.sync_state != wanted
                or s.replay_lsn is None
                or target_lsn is None
                or s.replay_lsn < target_lsn
            )
            tail = late.log_tail(10) or "(no log)"
            raise HowfastError(
                f"{late.name} did not start streaming from the primary within {timeout_s:g} s "
                f"(the primary says: {describe_sender(senders.get(late.name))}); its server "
                f"log's last lines:\n{tail}"
            )
        time.sleep(POLL_S)
