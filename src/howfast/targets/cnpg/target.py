"""`cnpg://[NAMESPACE/]CLUSTER`: an existing CloudNativePG cluster (docs/cloudnative-pg.md).

start() reads the Cluster, its pods and claims (discovery.py), the secret its spec names
(credentials.py; in memory only), forwards a loopback port to the primary for howfast's own
SQL, makes howfast's database (dbwork.py), then the client pod (client.py) on a node with
no instance. The load dials the -rw Service, so it follows the primary the operator picks.
stop() drops howfast's database (only if its comment says this run) and deletes the
objects carrying the run's label. The user's Cluster, pods, claims, Services and secrets
are never written; events ask the operator (ops.py)."""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from howfast.errors import HowfastError
from howfast.hosts.base import Host
from howfast.hosts.pod import PodHost
from howfast.model import JSONValue, TargetRecord
from howfast.targets import pgquery
from howfast.targets.base import Connection, PlannedClient, PlannedConnection, PlannedTarget, Target
from howfast.targets.capabilities import (
    ClientPlacement,
    HasClient,
    HasCurrentPrimary,
    HasInstances,
    InstanceView,
    OperatorManaged,
)
from howfast.targets.cnpg import client as c
from howfast.targets.cnpg import database as d
from howfast.targets.cnpg import dbwork
from howfast.targets.cnpg import discovery as disc
from howfast.targets.cnpg.api import CnpgApi
from howfast.targets.cnpg.credentials import application_databases, choose_secret, published
from howfast.targets.cnpg.forwards import InstanceForwards
from howfast.targets.cnpg.ops import OperatorEvents
from howfast.targets.cnpg.pods import instance_views, start_client
from howfast.targets.cnpg.spec import CnpgSpec
from howfast.targets.k8s import facts
from howfast.targets.k8s.cluster import Cluster, kubeconfig_namespace
from howfast.targets.k8s.pod_shells import RunningPod
from howfast.targets.k8s.spec import K8sOptions

PORT = 5432


class CnpgTarget(Target, HasClient, HasCurrentPrimary, OperatorManaged, HasInstances):
    kind = "cnpg"

    def __init__(self, spec: CnpgSpec, options: K8sOptions, *, name: str | None = None) -> None:
        self.spec = spec
        self.options = options
        self.name = name or spec.text
        self.token = secrets.token_hex(4)
        self.namespace = (
            spec.namespace
            or options.namespace
            or (kubeconfig_namespace(options.context) or "default")
        )
        self.client_node_asked = spec.client_node or options.node
        self.cluster: Cluster | None = None
        self.api: CnpgApi | None = None
        self.layout: disc.ClusterLayout | None = None
        self.forwards: InstanceForwards | None = None
        self.own: d.OwnDatabase | None = None
        self.made: dbwork.Made | None = None
        self.connection: Connection | None = None
        self.client_plan: c.ClientPlan | None = None
        self.client_node: c.ClientNode | None = None
        self.client_pod: dict[str, Any] | None = None
        self.warnings: list[str] = []
        self._api = RunningPod(self)
        self._started = False

    # -- before -------------------------------------------------------------------------
    def check(self, *, will_init: bool) -> None:
        """The Cluster exists and has a Ready primary that is not changing."""
        del will_init  # howfast's database is new: nothing of the user's is overwritten
        api = CnpgApi(self._cluster())
        _, layout = api.layout(self.namespace, self.spec.cluster)
        problem = disc.not_ready(layout)
        if problem is not None:
            raise HowfastError(problem, "try again once `kubectl get cluster` says healthy")

    def planned(self) -> PlannedTarget:
        """What start() creates and runs, before the cluster is read (--dry-run)."""
        own = d.OwnDatabase(self.token, "PUBLISHED_USER")
        plan = c.ClientPlan(self.token, self.namespace, "THE_CLUSTER'S_IMAGE", "CLUSTER_SECRET",
                            self.client_node_asked, context=self.options.context)  # fmt: skip
        owner = {"name": c.owner_name(self.token), "uid": "UID"}
        resource = d.database_resource(own, self.spec.cluster, self.namespace, owner)
        statements = (
            *(("SQL on the primary, if the user may CREATE DATABASE", (s,))
              for s in d.create_statements(own)),
            ("else: the operator's Database resource, then", d.mark_statements(own)),
            ("at the end, if its comment says this run", (d.drop_statement(own.name),)),
        )  # fmt: skip
        connection = PlannedConnection(
            host=f"{self.spec.cluster}-rw.{self.namespace}.svc", port=PORT, user="PUBLISHED_USER",
            dbname=own.name, password="", port_text=str(PORT),
        )  # fmt: skip
        client = PlannedClient(
            host=PodHost(c.client_description(plan), self._api),
            connection=connection,
            placement="pod",
            where=f"pod {c.client_pod_name(self.token)}",
            node=self.client_node_asked,
            objects=(c.client_pod(plan, owner),),
        )
        return PlannedTarget(
            host=PodHost(c.client_description(plan), self._api),
            connection=connection,
            scratch_dir=None,
            start=statements,
            objects=(c.owner_secret(self.token, self.namespace, self.name, ""), resource),
            client=client,
        )

    # -- start and stop ----------------------------------------------------------------
    def _cluster(self) -> Cluster:
        if self.cluster is None:
            self.cluster = Cluster(self.options.context)
        return self.cluster

    def _ready_cluster(
        self, api: CnpgApi, owner: Mapping[str, str]
    ) -> tuple[dict[str, Any], disc.ClusterLayout]:
        """The Cluster, refused unless it has a Ready primary that is not changing (a
        cluster howfast makes, made.py, is created and waited for here)."""
        del owner  # the user's Cluster is not howfast's: nothing of it is owned
        obj, layout = api.layout(self.namespace, self.spec.cluster)
        problem = disc.not_ready(layout)
        if problem is not None:
            raise HowfastError(problem)
        return obj, layout

    def start(self) -> Connection:
        from howfast.store import liveness

        cluster = self._cluster()
        self.api = api = CnpgApi(cluster)
        writer = json.dumps(liveness.this_process().document())
        self._started = True
        owner = cluster.create(c.owner_secret(self.token, self.namespace, self.name, writer))
        ref = {"name": c.owner_name(self.token), "uid": str(owner["metadata"]["uid"])}
        obj, layout = self._ready_cluster(api, ref)
        self.layout = layout
        choice = choose_secret(obj, self.spec.credentials)
        login = published(api.read_secret(self.namespace, choice.name))
        admin = Connection("127.0.0.1", 0, login.user, d.ADMIN_DATABASE, login.password)
        self.forwards = InstanceForwards(cluster, self.namespace, admin)
        self.own = d.own_database(self.token, login.user, application_databases(obj))
        resource = d.database_resource(self.own, layout.name, self.namespace, ref)
        primary = self.forwards.connection(layout.current_primary)
        own = self.own
        self.made = dbwork.create(primary, own, lambda: dbwork.via_operator(api, resource, own))
        self.connection = self.forwards.following(self._primary_now, self.own.name)
        self.client_node = c.choose_client_node(
            layout, c.schedulable(cluster.nodes()), self.client_node_asked
        )
        if self.client_node.beside is not None:
            self.warnings.append(f"the client pod runs on {self.client_node.node}: "
                                 f"{self.client_node.why}")  # fmt: skip
        self.client_plan = c.client_plan(
            obj, layout, token=self.token, secret=choice.name, node=self.client_node.node,
            pull_policy=self.options.pull_policy, context=self.options.context,
        )  # fmt: skip
        self.client_pod = start_client(
            cluster, self.client_plan, ref, c.rw_address(layout), self.options.start_timeout_s
        )
        return self.connection

    def exec_place(self) -> tuple[Cluster, str, str]:
        if self.cluster is None or self.client_pod is None:
            raise HowfastError(f"{self.name}: the client pod is not running")
        return self.cluster, self.namespace, c.client_pod_name(self.token)

    def stop(self) -> None:
        """Drop howfast's database (its comment says this run), delete the run's objects."""
        self._api.shells.close()
        problems = []
        if self.own is not None and self.forwards is not None and self.api is not None:
            try:
                admin = self.forwards.connection(self._primary_now())
                api, name = self.api, d.resource_name(self.token)
                dbwork.drop(admin, self.own, self.made,
                            lambda: api.delete_database(self.namespace, name))  # fmt: skip
            except HowfastError as exc:
                problems.append(f"database {self.own.name} was not dropped: {exc}")
        if self.forwards is not None:
            self.forwards.close()
        self.connection = None
        if self._started and self.cluster is not None:
            self._started = False
            if self.api is not None and self.own is not None:
                self.api.delete_database(self.namespace, d.resource_name(self.token))
            problems += self.cluster.delete_run(self.namespace, self.token)
        self.own = None
        self.client_pod = None
        if problems:
            raise HowfastError("; ".join(problems))

    def start_warnings(self) -> tuple[str, ...]:
        return tuple(self.warnings)

    # -- the primary, the client ---------------------------------------------------------
    def _primary_now(self) -> str:
        if self.api is None:
            raise HowfastError(f"{self.name}: not started")
        status = self.api.read_cluster(self.namespace, self.spec.cluster).get("status") or {}
        return str(status.get("currentPrimary") or "")

    def connection_now(self) -> Connection:
        """howfast's own connection: its forward dials the current primary each time."""
        if self.connection is None:
            raise HowfastError(f"{self.name}: not started")
        return self.connection

    def client_connection_now(self, follow: bool = False) -> Connection:
        """The -rw Service: it follows the primary whatever `follow` says."""
        del follow
        return self.client().connection

    def client(self) -> ClientPlacement:
        if self.client_plan is None or self.layout is None or self.connection is None:
            raise HowfastError(f"{self.name}: the client pod is not running")
        address = c.rw_address(self.layout)
        connection = Connection(address, PORT, self.connection.user, self.connection.dbname,
                                self.connection.password)  # fmt: skip
        description = facts.pod_description(
            self.client_pod, None, planned=c.client_description(self.client_plan)
        )
        record = c.client_record(self.client_node, self.layout)
        return ClientPlacement(PodHost(description, self._api), connection, record)

    def host(self) -> Host:
        """The server's machine: once started, the primary's pod (its /proc, its container's
        cgroup and memory, read by exec; no tool runs there: the client-side ones run in the
        client pod, and fio and pg_test_fsync have no directory here). Before, the client
        pod as planned."""
        if self.api is not None:
            primary = next((v for v in self.instance_views() if v.primary), None)
            if primary is not None:
                return primary.host
        plan = self.client_plan or c.ClientPlan(
            self.token, self.namespace, "THE_CLUSTER'S_IMAGE", "CLUSTER_SECRET", None
        )
        return PodHost(c.client_description(plan), self._api)

    def instance_views(self) -> Sequence[InstanceView]:
        """Every instance's pod as it runs now, for the samplers (read again each time)."""
        if self.cluster is None or self.api is None:
            return []
        pods = self.api.instance_pods(self.namespace, self.spec.cluster)
        return instance_views(self.cluster, pods, self._primary_now(), self.options.context)

    def metrics_text(self, instance: str) -> str | None:
        """The instance's exporter (port 9187), through a port-forward to its pod; None
        when its pod declares no metrics port."""
        if self.forwards is None or self.layout is None:
            return None
        known = self.layout.instance(instance)
        if known is not None and known.metrics_port is None:
            return None
        return self.forwards.metrics(instance, disc.METRICS_PORT)

    # -- the record ----------------------------------------------------------------------
    def record(self) -> TargetRecord:
        device: dict[str, JSONValue] = {"kubernetes": {"namespace": self.namespace,
                                                       "run_label": self.token}}  # fmt: skip
        if self.layout is not None:
            device["cnpg"] = self.layout.design_record()
            classes = disc.storage_classes(self.layout)
            device["data"] = {"storage_class": classes.get("data")}
            device["wal"] = {"storage_class": classes.get("wal", classes.get("data"))}
            device["wal_on_data_device"] = "wal" not in classes
        if self.own is not None:
            device["database"] = {"name": self.own.name, "made_by": self.made}
        version: str | None = None
        settings: dict[str, str] = {}
        if self.connection is not None:
            with contextlib.suppress(HowfastError):
                version, settings = pgquery.server_facts(self.connection_now())
        return TargetRecord(
            name=self.name, kind=self.kind, pg_version=version, settings=settings,
            device=device, location=f"{self.spec.text} (namespace {self.namespace})",
            client=c.client_record(self.client_node, self.layout),
        )  # fmt: skip

    # -- events through the operator -----------------------------------------------------
    def _events(self) -> OperatorEvents:
        if self.api is None or self.forwards is None:
            raise HowfastError(f"{self.name}: not started")
        forwards, api = self.forwards, self.api

        def layout() -> disc.ClusterLayout:
            return api.layout(self.namespace, self.spec.cluster)[1]

        def lags() -> Mapping[str, int | None]:
            return forwards.lags(self._primary_now())

        return OperatorEvents(api, self.namespace, self.spec.cluster, layout, forwards.serving,
                              lags)  # fmt: skip

    def operator_refusal(self, action: str, arg: str | None) -> str | None:
        if self.layout is None:  # before start: what the Cluster's spec will say is unknown
            return None
        return self._events().refusal(action, arg, self.layout) if self.api else None

    def operator_event(
        self, action: str, arg: str | None, now: Callable[[], float]
    ) -> Mapping[str, JSONValue]:
        return self._events().run(action, arg, now)
