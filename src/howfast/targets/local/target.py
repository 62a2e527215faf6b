"""LocalTarget: a throwaway PostgreSQL cluster that howfast creates with initdb in a directory
it owns, composed of parts (docs/architecture.md): its directories (dirs.py) and, when howfast
builds the storage too, a storage layer under them (an emulated volume); the server
(server.py) in its cgroups (cgroups.py); the standbys (standbys.py) and the failover
(takeover.py); the client placement (client.py). Its capabilities come from facets.py."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from pathlib import Path

from howfast.errors import HowfastError
from howfast.hosts.base import Host
from howfast.hosts.local import LocalHost
from howfast.machine.pgbin import PgInstall
from howfast.model import TargetRecord
from howfast.targets import pgquery
from howfast.targets.base import Connection, PlannedConnection, PlannedTarget, Target
from howfast.targets.capabilities import (
    ClientPlacement,
    HasClient,
    HasStorage,
    HoldsDirectoryLock,
    Keepable,
)
from howfast.targets.local.cgroups import ServerCgroups
from howfast.targets.local.client import ClientAccess
from howfast.targets.local.dirs import ClusterDirs, StorageLayer
from howfast.targets.local.facets import ServerFacet, StandbyFacet
from howfast.targets.local.options import (
    DEFAULTS,
    IN_THE_CLUSTER,
    SUPERUSER,
    LocalOptions,
    StandbyPlacement,
)
from howfast.targets.local.server import PrimaryServer
from howfast.targets.local.standbys import LocalStandbys, Step
from howfast.targets.local.takeover import Takeover
from howfast.targets.osuser import current_user, server_user
from howfast.targets.replicas.spec import ReplicaSpec


class LocalTarget(
    Target, ServerFacet, StandbyFacet, HasStorage, HoldsDirectoryLock, Keepable, HasClient
):
    kind = "local"

    def __init__(
        self,
        directory: Path,
        install: PgInstall,
        *,
        settings: Mapping[str, str] | None = None,
        replicas: ReplicaSpec | None = None,
        options: LocalOptions = DEFAULTS,
        standbys: StandbyPlacement = IN_THE_CLUSTER,
        storage: StorageLayer | None = None,
    ) -> None:
        """`storage`: a layer howfast builds in `directory` (an emulated volume), the cluster
        then made on it; by default the cluster goes in `directory` itself."""
        self.directory = directory.absolute()
        self.install = install
        self.settings = dict(settings or {})
        self.replicas = replicas
        self.keep = options.keep
        self.name = options.name or str(self.directory)
        self.token = secrets.token_hex(4)
        self.layer = storage
        root = storage.cluster_root() if storage is not None else self.directory
        self.dirs = ClusterDirs(root, options.wal_dir, self.token)
        self.cgroups = ServerCgroups(options.memory_limit, self.token, self.settings)
        self.client_access = ClientAccess(options.client, self.token)
        self.server = PrimaryServer(
            install,
            self.dirs,
            self.cgroups,
            self.client_access,
            checksums=options.checksums,
            keep=options.keep,
        )
        self.standby_set = (
            LocalStandbys(replicas, standbys, install, self.dirs) if replicas else None
        )
        self.takeover = Takeover(self.server, self.standby_set)
        self.warnings: list[str] = []
        self.step_settings: dict[str, str] = {}

    # -- checks before anything is created --------------------------------------------
    def check_inputs(self) -> None:
        """The directories (target, WAL, standbys: each existing, writable, empty or
        howfast's) and the options that cannot go together, read only: the run service
        calls it before a run and before its dry run alike."""
        if self.layer is not None:
            self.layer.check_inputs()
        else:
            self.dirs.check_inputs()
        if self.standby_set is not None:
            self.standby_set.check_inputs(self.keep)

    def check(self, *, will_init: bool) -> None:
        self.check_inputs()
        self.warnings = self.layer.check() if self.layer else self.dirs.lock_and_scan()
        missing = [p for p in ("initdb", "postgres", "pgbench") if not self.install.program(p)]
        if missing:
            raise HowfastError(
                f"{self.install.bindir}: missing {', '.join(missing)}",
                "install the PostgreSQL server: sudo apt-get install -y postgresql",
            )
        self.server.user = server_user()
        if self.layer is None:
            self.dirs.check_reachable(self.server.user)
        self.cgroups.check_memory_limit()
        if self.standby_set is not None:
            self.warnings += self.standby_set.check(self.server.user)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> Connection:
        if self.server.user is None:
            self.check(will_init=True)
        user = self.server.user
        assert user is not None
        if self.layer is not None:
            self.warnings += self.layer.build()
            self.cgroups.io_cgroup = self.layer.io_cgroup()
            # the cluster's directory on it: checked and locked as a target directory is
            self.dirs.check_inputs()
            self.warnings += self.dirs.lock_and_scan()
            self.dirs.check_reachable(user)
        others = self.standby_set.other_dirs() if self.standby_set else []
        self.warnings += self.dirs.create(user, others)
        replication: dict[str, str] = {}
        hba_first = ""
        if self.standby_set is not None:
            replication = self.standby_set.replication_settings()
            # the standbys' loopback addresses, beside 127.0.0.1 with --client tcp
            client = self.client_access.listen_settings().get("listen_addresses")
            listen = [client] if client else []
            replication["listen_addresses"] = ",".join(listen + self.standby_set.listen_addresses())
            hba_first = self.standby_set.hba_first()
        connection, warnings = self.server.start({**replication, **self.settings}, hba_first)
        self.warnings += warnings
        if self.standby_set is not None:
            self.standby_set.start(connection, user, self.takeover.put_in_force)
        return connection

    def stop(self) -> None:
        if self.layer is not None:  # measured or interrupted: nothing waits out a delay now
            self.layer.undelay()
        try:
            try:
                self._stop()
            finally:  # the directories are free for the next run once all is removed
                self.dirs.release_locks()
        finally:
            if self.layer is not None:
                self.layer.teardown()

    def _stop(self) -> None:
        try:
            if self.standby_set is not None:  # standbys first: they follow the primary
                self.standby_set.stop()
        finally:
            try:
                self.takeover.stop_serving()
            finally:
                self.server.stop()

    def note_run(self, run_id: int) -> None:
        if self.layer is not None:
            self.layer.note_run(run_id)
        else:
            self.dirs.note_run(run_id)

    def kept_message(self) -> str | None:
        if not self.keep:
            return None
        pg_ctl = self.install.program("pg_ctl")
        cluster_dir = self.dirs.cluster_dir
        return (
            f"kept the cluster in {cluster_dir} (stopped). Start it with: "
            f"{pg_ctl} -D {self.dirs.data_dir} -l {cluster_dir / 'server.log'} start"
        )

    # -- what the run reads -----------------------------------------------------------------
    @property
    def connection(self) -> Connection | None:
        """The primary's (the promoted standby's after a failover), once started."""
        return self.server.connection

    def host(self) -> Host:
        """This machine, with PostgreSQL's programs from the target's install (as the storage
        layer sees it, when there is one: in its I/O cgroup)."""
        return self.layer.host() if self.layer is not None else LocalHost(self.install)

    def start_warnings(self) -> tuple[str, ...]:
        return tuple(self.warnings)

    def client(self) -> ClientPlacement:
        """Where pgbench runs (this machine) and how it reaches the server (after start)."""
        assert self.server.connection is not None, "client() is known after start"
        return self.client_access.placement(self.server.connection, LocalHost(self.install))

    def scratch_dir(self) -> Path | None:
        return self.dirs.scratch_dir()

    def storage_paths(self) -> dict[str, Path]:
        serving = self.takeover.serving
        if serving is not None:  # the promoted standby's WAL is in its data directory
            return {"data": serving.data_dir, "wal": serving.data_dir}
        return self.dirs.storage_paths()

    def record(self) -> TargetRecord:
        device = {**self.dirs.device_record(), **self.cgroups.device_record()}
        if self.layer is not None:
            device.update(self.layer.device_record())
        connection = self.server.connection
        version: str | None = None
        settings: dict[str, str] = {}
        if connection and self.alive():
            version, settings = pgquery.server_facts(connection)
        return TargetRecord(
            name=self.name,
            kind=self.kind,
            pg_version=version or self.install.version,
            settings=settings,
            device=device,
            location=str(self.directory),
            standbys=self.standby_set.records(self.alive()) if self.standby_set else (),
            client=dict(self.client().record) if connection else {},
        )

    def planned(self) -> PlannedTarget:
        """The storage layer's commands, then the cluster's, for --dry-run."""
        layer = self.layer.planned() if self.layer is not None else ()
        return PlannedTarget(
            host=self.host(),
            connection=self._planned_connection(),
            scratch_dir=self.dirs.cluster_dir,
            start=(*layer, *self._planned_start()),
        )

    def _planned_connection(self) -> Connection:
        """The socket directory is made at start (a fresh private directory), the port
        chosen then unless the settings name one."""
        port = self.settings.get("port")
        return PlannedConnection(
            host=self.client_access.planned_host(self.dirs.planned_socket_dir()),
            port=0,
            user=SUPERUSER,
            dbname="postgres",
            port_text=port or "PORT",
        )

    def _planned_start(self) -> tuple[Step, ...]:
        """What start() runs before any step: initdb and the server, then each standby's
        base backup and server, and the design put in force."""
        steps: tuple[Step, ...] = (
            ("initdb, as the server's OS user", tuple(self.server.initdb_argv())),
            ("the server, in its own session", tuple(self.server.postgres_argv())),
        )
        if self.standby_set is None:
            return steps
        primary = self._planned_connection()
        # no server_user(): as root it may create a user, and a dry run creates nothing
        user, run_dir = self.server.user or current_user(), Path(primary.host)
        return (*steps, *self.standby_set.planned(primary, user, run_dir))
