"""A pod target's plan, before anything is created (--dry-run works without a cluster):
the manifests, the standbys' and the client's, the pod's host and description."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from howfast.hosts.pod import PodDescription, PodHost
from howfast.targets.base import (
    Connection,
    PlannedClient,
    PlannedConnection,
    PlannedTarget,
)
from howfast.targets.k8s import client_manifests as cm
from howfast.targets.k8s import facts
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s import network as net
from howfast.targets.k8s import standby_manifests as sm
from howfast.targets.k8s.pod_state import PodTargetState

if TYPE_CHECKING:
    from howfast.hosts.base import Host
    from howfast.hosts.pod import PodExec


class PodPlanFacet(PodTargetState):
    """What the target will create, and the pod's host."""

    def plan(self, port: int | str | None = None, writer: str = "") -> m.Plan:
        if port is None:
            port = self.port
        return m.Plan(
            token=self.token,
            namespace=self.namespace,
            spec=self.spec,
            options=self.options,
            port=port,
            settings=self.settings,
            server=self.server,
            checksums=self.checksums,
            target_name=self.name,
            writer=writer,
            network=self.mode,
            remote_clients=self.server and (self.spec.replicas > 0 or self.client_mode == "pod"),
        )

    def standby_plans(self, host_ports: list[int | str] | None = None) -> list[sm.StandbyPlan]:
        """Each standby's plan; host mode: on `host_ports` (PORT_STANDBY_i placeholders when
        not given: a dry run)."""
        if not self.server:
            return []
        run = self.plan()
        count = self.spec.replicas
        ports = host_ports or [f"PORT_STANDBY_{i}" for i in range(1, count + 1)]
        primary = net.primary_address(run.name, self.mode, self.port)
        return [
            sm.StandbyPlan(
                run=run,
                index=i,
                mode=self.mode,
                primary=primary,
                host_port=ports[i - 1],
                standby_class=self.spec.standby_class,
            )
            for i in range(1, count + 1)
        ]

    def planned(self) -> PlannedTarget:
        """The pod as planned (node unknown), and every object start() creates, in order."""
        manifests = m.all_manifests(self.plan(), password="GENERATED-AT-RUN-TIME")
        owner = {"name": self.plan().name, "uid": "UID"}
        for standby in self.standby_plans():
            manifests += sm.objects(standby, owner)
        return PlannedTarget(
            host=PodHost(self.planned_pod(), self._api),
            connection=self._planned_connection(),
            scratch_dir=self._scratch(),
            objects=tuple(manifests),
            client=self._planned_client(owner),
        )

    def _planned_client(self, owner: Mapping[str, str]) -> PlannedClient | None:
        """The client pod, apart from the server's (--client pod), with what it dials."""
        if not self.server or self.client_mode != "pod":
            return None
        run = self.plan()
        address = self.primary_address()
        connection = PlannedConnection(
            host=address.host, port=0, user=m.SUPERUSER, dbname=cm.DATABASE, password="",
            port_text=str(address.port),
        )  # fmt: skip
        return PlannedClient(
            host=PodHost(cm.planned_client_pod(run), self._api),
            connection=connection,
            placement="pod",
            where=f"pod {cm.client_pod_name(run)}",
            node=self.client_node,
            objects=(
                cm.client_pod(run, self.mode, owner, node=self.client_node, avoid=self.drains),
            ),
        )

    def _planned_connection(self) -> Connection | None:
        if not self.server:
            return None
        return PlannedConnection(
            host="127.0.0.1", port=0, user=m.SUPERUSER, dbname="postgres", password="",
            port_text="PORT",
        )  # fmt: skip

    def _scratch(self) -> Path:
        return Path(m.SCRATCH) if self.server else Path(m.DATA_MOUNT)

    def primary_address(self) -> net.ServerAddress:
        """Where the run's other pods (standbys, the client) dial the primary."""
        return net.primary_address(self.plan().name, self.mode, self.port)

    def host(self) -> Host:
        """The pod as a host: once started, the running pod on its node; before (checks, a
        dry run), the pod as planned, its node not known yet."""
        if self.pod is None:
            return PodHost(self.planned_pod(), self._api)
        return self._pod_host()

    def _pod_host(self) -> PodHost:
        if self._host is None:
            self._host = PodHost(self.pod_description(), self._api)
        return self._host

    def pod_description(self) -> PodDescription:
        """As planned until the pod runs; then the pod and node as the cluster shows them."""
        planned = self.planned_pod()
        if self.pod is None:
            return planned
        return facts.pod_description(self.pod, self.node, planned=planned)

    def pod_api(self) -> PodExec:
        return self._api

    def planned_pod(self) -> PodDescription:
        """The run's pod as its manifests make it (manifests.py), its node unknown."""
        options = self.options
        separate_fio = options.fio_image != options.image
        images = {m.TOOLS: options.image}
        if self.server:
            images[m.POSTGRES] = options.image
        if separate_fio:
            images[m.FIO] = options.fio_image
        return PodDescription(
            context=options.context,
            namespace=self.namespace,
            pod=self.plan().name,
            tools_container=m.TOOLS,
            server_container=m.POSTGRES if self.server else None,
            data_dir=m.PGDATA,
            work_dir=m.WORK_MOUNT,
            volume_root=m.MOUNT_ROOT,
            path_setup=m.PATH_SETUP,
            memory_limit_bytes=options.memory_bytes,
            program_containers={"fio": m.FIO} if separate_fio else {},
            images=images,
        )
