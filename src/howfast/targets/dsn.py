"""An existing PostgreSQL server reached by a libpq URI. howfast never initdb's it and never
touches its files; it refuses to overwrite existing pgbench tables unless --yes."""

from __future__ import annotations

import psycopg.conninfo

from howfast.errors import UsageError
from howfast.hosts.base import Host
from howfast.hosts.local import ClientHost
from howfast.model import TargetRecord
from howfast.redact import redact_dsn
from howfast.targets import pgquery
from howfast.targets.base import Connection, Target
from howfast.targets.pgbin import PgInstall

_CORE_KEYS = {"host", "hostaddr", "port", "user", "dbname", "password"}


def parse_dsn(dsn: str) -> Connection:
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise UsageError(f"invalid connection URI {redact_dsn(dsn)}: {exc}") from None
    host = str(params.get("host") or params.get("hostaddr") or "localhost")
    user = str(params.get("user") or "postgres")
    options = {k: str(v) for k, v in params.items() if k not in _CORE_KEYS and v is not None}
    password = params.get("password")
    return Connection(
        host=host,
        port=int(str(params.get("port") or 5432)),
        user=user,
        dbname=str(params.get("dbname") or user),
        password=str(password) if password is not None else None,
        options=options,
    )


class DsnTarget(Target):
    kind = "dsn"

    def __init__(self, dsn: str, *, overwrite: bool = False, name: str | None = None) -> None:
        self.connection = parse_dsn(dsn)
        self.location = redact_dsn(dsn)
        self.name = name or self.location
        self.overwrite = overwrite
        self.warnings: list[str] = []

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

    def host(self, install: PgInstall) -> Host:
        """The tools run here; the server's machine is out of sight."""
        return ClientHost(install)

    def planned_connection(self) -> Connection:
        return self.connection

    def record(self) -> TargetRecord:
        version, settings = pgquery.server_facts(self.connection)
        return TargetRecord(
            name=self.name,
            kind=self.kind,
            pg_version=version,
            settings=settings,
            device={"note": "an existing server: its storage is not visible to howfast"},
            location=self.location,
        )

    def stop(self) -> None:
        """Nothing to stop: the server is not ours."""
