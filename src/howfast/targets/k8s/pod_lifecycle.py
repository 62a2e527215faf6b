"""A pod target's lifecycle: start() creates the run's objects owner first and waits for
the pod, its standbys and its client pod; stop() deletes everything carrying the run's label
and waits until it is gone."""

from __future__ import annotations

import contextlib
import json
import secrets
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from howfast.errors import HowfastError, UsageError
from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.k8s import client_manifests as cm
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s.cluster import Cluster, PortForward
from howfast.targets.k8s.cluster_pods import container_running
from howfast.targets.k8s.pod_checks import PodChecksFacet
from howfast.targets.k8s.pod_state import ObjectsMade
from howfast.targets.k8s.standby import PodStandby, wait_streaming

SERVER_POLL_S = 0.1  # how often start() asks the server in its pod whether it accepts


class PodLifecycleFacet(PodChecksFacet):
    """Creating the run's objects, and deleting them."""

    def start_ahead(self) -> None:
        """Create the run's objects now, without waiting for them (issue 34: the runner calls
        it while the run's previous target measures): the cluster schedules the pod,
        provisions its volumes and starts its containers meanwhile, but its server waits to
        be released by start(), so that nothing is written on the node's disks until then.
        A failure is kept, and raised by start()."""
        if self._started or self._ahead is not None:
            return
        try:
            self._ahead = self._create_objects(held=True)
        except (HowfastError, OSError) as exc:
            self._ahead = exc

    def start(self) -> Connection | None:
        made = self._take_ahead() or self._create_objects(held=False)
        cluster, plan, listener = made.cluster, made.plan, made.listener
        claims = [c for c in (plan.data_claim, plan.wal_claim) if c]
        deadline = time.monotonic() + self.options.start_timeout_s
        try:
            if made.held:  # bound already: its client pod starts while its server does
                self.pod = self._release(made)
            else:  # once bound: its client pod starts while initdb runs
                self.pod = cluster.wait_pod_ready(
                    self.namespace, plan.name, claims, self.options.start_timeout_s, until=_bound
                )
            self._place_client(made)
            self.pod = self._wait_server(made, claims, deadline)
            node_name = (self.pod.get("spec") or {}).get("nodeName")
            self.node = cluster.read("Node", str(node_name)) if node_name else None
        except BaseException:
            if listener is not None:
                listener.close()
            raise
        if not self.server:
            return None
        if listener is not None:
            self.forward = PortForward(cluster, self.namespace, plan.name, listener)
            self.forward.start()
        self.connection = Connection(
            host="127.0.0.1",
            port=int(self.port),
            user=m.SUPERUSER,
            dbname="postgres",
            password=made.password,
        )
        self._wait_sql(30.0)
        self.password = made.password  # in memory only: the client's Connection carries it
        if self.spec.replicas:
            self._start_standbys(cluster, made.owner)
        if self.client_mode == "pod":
            self._wait_client(cluster, plan)
        return self.connection

    def _place_client(self, made: ObjectsMade) -> None:
        """Once the primary is bound (its node known, so that the client pod's anti-affinity
        sees it): the events' check that its volumes let it move, then the client pod."""
        if self.drains or any(move for _, move in self.recreations):  # bound: before a step
            pinned = self.volumes_pinned()
            if pinned is not None:
                what = "a move" if any(m for _, m in self.recreations) else "a drain"
                raise UsageError(f"{self.name}: {what} event cannot apply: {pinned}")
        if self.client_mode == "pod":
            made.cluster.create(
                cm.client_pod(
                    made.plan, self.mode, made.owner, node=self.client_node, avoid=self.drains
                )
            )

    def _take_ahead(self) -> ObjectsMade | None:
        """What start_ahead() made (None: nothing); raises what it failed with."""
        ahead, self._ahead = self._ahead, None
        if isinstance(ahead, Exception):
            raise ahead
        return ahead

    def _create_objects(self, *, held: bool) -> ObjectsMade:
        """The owner Secret, then its dependents (the server's pod `held` when made ahead);
        a port reserved for the port-forward (pod mode) or chosen (host mode)."""
        from howfast.store import liveness

        cluster = self.connect()
        # pod mode: the forward's port is the server's in its pod; host mode: no forward
        listener: socket.socket | None = None
        if self.server and self.mode == "pod":
            listener = PortForward.reserve()
            self.port = int(listener.getsockname()[1])
        elif self.server:
            self.port = PortForward.free_port()
        plan = self.plan(None, json.dumps(liveness.this_process().document()))
        password = secrets.token_urlsafe(24)
        held = held and self.server
        try:
            self._started = True
            owner = cluster.create(m.owner_secret(plan, password))
            ref = {"name": plan.name, "uid": str(owner["metadata"]["uid"])}
            for manifest in m.dependents(plan, ref):
                if manifest["kind"] == "Pod":
                    self.pod_manifest = manifest  # as events make it again: not held
                    manifest = m.held(manifest) if held else manifest
                self._create(cluster, manifest)
        except BaseException:
            if listener is not None:
                listener.close()
            raise
        return ObjectsMade(cluster, plan, ref, password, listener, held)

    def _release(self, made: ObjectsMade) -> dict[str, Any]:
        """Let the server of a pod made ahead start (initdb, then PostgreSQL), once its
        container runs; the pod as it was then."""
        name = made.plan.name
        claims = [c for c in (made.plan.data_claim, made.plan.wal_claim) if c]
        pod = made.cluster.wait_pod_ready(
            self.namespace,
            name,
            claims,
            self.options.start_timeout_s,
            until=lambda pod: container_running(pod, m.POSTGRES),
        )
        release = ["/bin/sh", "-c", f": > {m.RELEASE_FILE}"]
        out = made.cluster.exec(self.namespace, name, m.POSTGRES, release, timeout_s=60)
        if out.returncode != 0:
            raise HowfastError(
                f"{self.name}: the server in pod {name} could not be released: "
                f"{out.stderr.strip() or f'exit status {out.returncode}'}"
            )
        return pod

    def _wait_server(self, made: ObjectsMade, claims: list[str], deadline: float) -> dict[str, Any]:
        """The pod once its server accepts connections, polled in the pod (pg_isready every
        0.1 s) rather than waited for as Ready, which the kubelet's readiness probe reports
        up to its period (2 s) later (issue 34). Ready is still waited for when something
        dials the server through its Service (standbys, the client pod), when there is no
        server (a probe's pod), and when the poll fails: the pod's status then says why."""
        cluster, name = made.cluster, made.plan.name

        def left() -> float:
            return max(1.0, deadline - time.monotonic())

        if self.server and not self.spec.replicas and self.client_mode != "pod":
            pod = cluster.wait_pod_ready(
                self.namespace, name, claims, left(),
                until=lambda pod: container_running(pod, m.POSTGRES),
            )  # fmt: skip
            if self._server_accepts(cluster, name, made.plan.port, left()):
                return pod
        return cluster.wait_pod_ready(self.namespace, name, claims, left())

    def _server_accepts(self, cluster: Cluster, pod: str, port: int | str, wait_s: float) -> bool:
        """Whether the server in the pod accepted connections within `wait_s` (False too
        when the exec failed: the container ended, say)."""
        tries = max(1, int(wait_s / SERVER_POLL_S))
        script = (
            f"{m.PATH_SETUP}; n=0; until pg_isready -q -h 127.0.0.1 -p {int(port)} "
            f"-U {m.SUPERUSER} -t 2; do n=$((n+1)); [ $n -ge {tries} ] && exit 1; "
            f"sleep {SERVER_POLL_S}; done"
        )
        try:
            out = cluster.exec(
                self.namespace, pod, m.POSTGRES, ["/bin/sh", "-c", script], timeout_s=wait_s + 30
            )
        except HowfastError:
            return False
        return out.returncode == 0

    def _wait_client(self, cluster: Cluster, plan: m.Plan) -> None:
        """The client pod Ready, and the primary reachable from it (pg_isready, 30 s)."""
        name = cm.client_pod_name(plan)
        try:
            self.client_pod = cluster.wait_pod_ready(
                self.namespace, name, [], self.options.start_timeout_s
            )
        except HowfastError as exc:
            raise HowfastError(f"the client pod did not start: {exc}") from None
        node_name = (self.client_pod.get("spec") or {}).get("nodeName")
        self.client_pod_node = cluster.read("Node", str(node_name)) if node_name else None
        address = self.primary_address()
        probe = (
            f"{m.PATH_SETUP}; i=0; until pg_isready -q -h {address.host} -p {address.port} "
            f"-U {m.SUPERUSER} -t 2; do i=$((i+1)); [ $i -ge 15 ] && exit 1; sleep 1; done"
        )
        out = cluster.exec(self.namespace, name, m.TOOLS, ["/bin/sh", "-c", probe], timeout_s=60)
        if out.returncode != 0:
            raise HowfastError(
                f"the client pod cannot reach {address.text}: pg_isready failed for 30 s "
                "(no pod network or cluster DNS? give --client same-pod, or "
                "HOWFAST_K8S_NETWORK=host on a test cluster whose nodes are this machine)"
            )

    def _start_standbys(self, cluster: Cluster, owner: Mapping[str, str]) -> None:
        """Standby pods once the primary is Ready, one after the other (each base backup
        reads the primary's whole volume), then until every one streams and has caught up."""
        assert self.connection is not None
        ports: list[int | str] | None = None
        if self.mode == "host":
            ports = [PortForward.free_port() for _ in range(self.spec.replicas)]
        for plan in self.standby_plans(ports):
            standby = PodStandby(plan, cluster)
            self.standby_pods.append(standby)
            standby.create(owner)
            standby.wait_ready(self.options.start_timeout_s)
        self.senders = wait_streaming(self.standby_pods, self.connection, self.spec.sync)

    def _create(self, cluster: Cluster, manifest: dict[str, Any]) -> None:
        """Create one object; a NetworkPolicy this user may not create is a warning (the
        servers' password still guards their port)."""
        try:
            cluster.create(manifest)
        except HowfastError as exc:
            if manifest["kind"] != "NetworkPolicy" or "forbidden" not in str(exc):
                raise
            self.warnings.append(
                "no NetworkPolicy (forbidden): any pod of the cluster can reach the servers' "
                "port (password-protected)"
            )

    def start_warnings(self) -> tuple[str, ...]:
        return tuple(self.warnings)

    def _wait_sql(self, timeout_s: float) -> None:
        """Until the server answers through the forward (a restart may still be ending)."""
        assert self.connection is not None
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with pgquery.connect(self.connection, timeout_s=5) as db:
                    db.execute("SELECT 1")
                return
            except HowfastError as exc:
                if time.monotonic() > deadline:
                    raise HowfastError(f"{self.name}: the server does not answer: {exc}") from None
                time.sleep(0.3)

    def stops_aside(self) -> bool:
        """Beside the next target's start, unless a drain may have cordoned a node: its
        pods would be scheduled around that node until stop() uncordons it."""
        return not self.drains and not self.cordoned_nodes

    def exec_place(self) -> tuple[Cluster, str, str]:
        if self.cluster is None or self.pod is None:
            raise HowfastError(f"{self.name}: the pod is not running")
        return self.cluster, self.namespace, f"howfast-{self.token}"

    def stop(self) -> None:
        """Delete every object of this run (by its label), wait until they are gone."""
        self._stop_server_at_once()
        self._api.shells.close()
        ahead, self._ahead = self._ahead, None  # made ahead, never started
        if isinstance(ahead, ObjectsMade) and ahead.listener is not None:
            ahead.listener.close()
        if self.forward is not None:
            self.forward.close()
            self.forward = None
        self.connection = None
        with self._objects:  # an event's pod is made before this, or not at all
            if not self._started or self.cluster is None:
                return
            self._started = False
        warnings = []
        for node in sorted(self.cordoned_nodes):  # a drain's window the schedule did not end
            try:
                self.uncordon(node)
            except HowfastError as exc:
                warnings.append(f"node {node} is still cordoned: {exc}")
        warnings += self.cluster.delete_run(self.namespace, self.token)
        self.pod = None
        self.standby_pods = []
        self.client_pod = None
        self.pod_manifest = None
        self.password = None
        if warnings:
            raise HowfastError("; ".join(warnings))

    def _stop_server_at_once(self) -> None:
        """Before the pod is deleted: PostgreSQL stopped without a shutdown checkpoint (its
        data is deleted next), so that the deletion does not wait for its dirty buffers to be
        written and flushed, on disks the next target may be starting on. Best effort: the
        deletion stops it anyway."""
        if not self.server or self.pod is None or self.cluster is None:
            return
        script = f"{m.PATH_SETUP}; pg_ctl -D {m.PGDATA} stop -m immediate -w -t 10 >/dev/null 2>&1"
        with contextlib.suppress(HowfastError, OSError):
            _, namespace, pod = self.exec_place()
            self._api.exec(namespace, pod, m.POSTGRES, ["/bin/sh", "-c", script], timeout_s=15)

    def scratch_dir(self) -> Path | None:
        return None if self.pod is None else self._scratch()

    def storage_paths(self) -> dict[str, Path]:
        if self.pod is None:
            return {}
        wal = m.WAL_DIR if self.spec.wal else f"{m.PGDATA}/pg_wal"
        return {"data": Path(m.PGDATA), "wal": Path(wal)}


def _bound(pod: Mapping[str, Any]) -> bool:
    """Scheduled: the pod has its node (its containers may not run yet)."""
    return bool((pod.get("spec") or {}).get("nodeName"))
