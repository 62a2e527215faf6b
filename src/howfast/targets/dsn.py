"""An existing PostgreSQL server reached by a libpq URI. howfast never initdb's it and never
touches its files; it refuses to overwrite existing pgbench tables unless --yes."""

from __future__ import annotations

import psycopg.conninfo

from howfast.errors import UsageError
from howfast.hosts.base import Host
from howfast.hosts.local import ClientHost
from howfast.machine.pgbin import PgInstall
from howfast.model import TargetRecord
from howfast.redact import passwords_in, redact_dsn, redact_text
from howfast.targets import pgquery
from howfast.targets.base import Connection, PlannedTarget, Target

_CORE_KEYS = {"host", "hostaddr", "port", "user", "dbname", "password"}


def parse_dsn(dsn: str) -> Connection:
    """A URI or key=value connection string, as libpq reads it. Every message about it is
    redacted: libpq quotes the part it could not read, which may be the password."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        message = f"invalid connection string {redact_dsn(dsn)}: {exc}"
        raise UsageError(redact_text(message, *passwords_in(dsn))) from None
    shown = redact_dsn(dsn)
    host = str(params.get("host") or params.get("hostaddr") or "localhost")
    port_text = str(params.get("port") or 5432)
    if any("," in str(params.get(key) or "") for key in ("host", "hostaddr", "port")):
        raise UsageError(
            f"{shown} names several servers ({host}, ports {port_text}): howfast measures one "
            "server, and libpq would connect each tool to whichever answers first",
            "give one host and port",
        )
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UsageError(f"{shown}: port {port_text!r} is not a port number (1-65535)")
    user = str(params.get("user") or "postgres")
    options = {k: str(v) for k, v in params.items() if k not in _CORE_KEYS and v is not None}
    password = params.get("password")
    return Connection(
        host=host,
        port=int(port_text),
        user=user,
        dbname=str(params.get("dbname") or user),
        password=str(password) if password is not None else None,
        options=options,
    )


class DsnTarget(Target):
    kind = "dsn"

    def __init__(
        self,
        dsn: str,
        *,
        install: PgInstall | None = None,
        overwrite: bool = False,
        name: str | None = None,
    ) -> None:
        self.connection = parse_dsn(dsn)
        self.install = install  # the client tools' (pgbench, psql)
        self.location = redact_dsn(dsn)
        self.name = name or self.location
        self.overwrite = overwrite

    def check(self, *, will_init: bool) -> None:
        existing = pgquery.existing_pgbench_tables(self.connection)
        if will_init and existing and not self.overwrite:
            raise UsageError(
                f"{self.location} already has pgbench tables ({', '.join(existing)}); "
                "initialising would drop them",
                "pass --yes to allow it",
            )

    def start(self) -> Connection:
        return self.connection

    def host(self) -> Host:
        """The tools run here; the server's machine is out of sight."""
        return ClientHost(self.install)

    def planned(self) -> PlannedTarget:
        return PlannedTarget(host=self.host(), connection=self.connection, scratch_dir=None)

    def record(self) -> TargetRecord:
        version, settings = pgquery.server_facts(self.connection)
        device: dict[str, object] = {
            "note": "an existing server: its storage is not visible to howfast"
        }
        platform = pgquery.server_platform(self.connection)
        if platform:
            device["server_platform"] = platform  # what wal_sync_method means depends on it
        return TargetRecord(
            name=self.name,
            kind=self.kind,
            pg_version=version,
            settings=settings,
            device=device,
            location=self.location,
        )

    def stop(self) -> None:
        """Nothing to stop: the server is not ours."""
