"""The Target interface: provision or reach a PostgreSQL server, describe it, stop it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from howfast.model import TargetRecord

if TYPE_CHECKING:
    from howfast.hosts.base import Host


# libpq's connection keywords that have an environment variable (libpq's "Environment
# Variables" section); most are PG + the upper-cased keyword, these few are not.
LIBPQ_ENV = {
    **{
        k: f"PG{k.upper()}"
        for k in (
            "channel_binding",
            "connect_timeout",
            "gssencmode",
            "gsslib",
            "gssdelegation",
            "hostaddr",
            "load_balance_hosts",
            "options",
            "passfile",
            "requirepeer",
            "require_auth",
            "service",
            "servicefile",
            "sslcert",
            "sslcompression",
            "sslcrl",
            "sslcrldir",
            "sslkey",
            "sslmode",
            "sslnegotiation",
            "sslrootcert",
            "sslsni",
            "target_session_attrs",
        )
    },
    "application_name": "PGAPPNAME",
    "client_encoding": "PGCLIENTENCODING",
    "krbsrvname": "PGKRBSRVNAME",
    "ssl_min_protocol_version": "PGSSLMINPROTOCOLVERSION",
    "ssl_max_protocol_version": "PGSSLMAXPROTOCOLVERSION",
}


@dataclass(frozen=True)
class Connection:
    """How clients reach the server. The password stays in memory: it goes to pgbench and
    psycopg through the environment/arguments of this process, never to disk or output."""

    host: str
    port: int
    user: str
    dbname: str
    password: str | None = field(default=None, repr=False)
    options: dict[str, str] = field(default_factory=dict)  # other libpq keywords (sslmode...)
    # (issue 29) Other servers to try after this one, in order (host, port): a load that
    # follows a failover asks libpq for the first that accepts writes among them all.
    alternates: tuple[tuple[str, int], ...] = ()

    def pgbench_args(self) -> list[str]:
        """Connection arguments for pgbench/psql; the password is not among them. With
        alternates, a conninfo string in the database's place (pgbench expands it)."""
        if self.alternates:
            return ["-U", self.user, self.conninfo()]
        return ["-h", self.host, "-p", str(self.port), "-U", self.user, self.dbname]

    def _multi_host(self) -> dict[str, str]:
        servers = [(self.host, self.port), *self.alternates]
        return {
            "host": ",".join(h for h, _ in servers),
            "port": ",".join(str(p) for _, p in servers),
            "target_session_attrs": "read-write",
        }

    def conninfo(self) -> str:
        """The multi-host conninfo string of a connection with alternates (no password)."""
        keywords = {**self._multi_host(), "dbname": self.dbname}
        return " ".join(f"{k}={conninfo_value(v)}" for k, v in keywords.items())

    def client_env(self) -> dict[str, str]:
        """Environment variables for libpq clients: PGPASSWORD and PGSSLMODE-style options."""
        return {**self.options_env(), **self.secret_env()}

    def options_env(self) -> dict[str, str]:
        """PGSSLMODE-style variables for the other libpq keywords: safe to print. A keyword
        libpq reads from no variable (keepalives, sslpassword...) cannot reach the tools this
        way, and is left out: it only tunes the connection, howfast's own ones have it."""
        return {LIBPQ_ENV[k]: v for k, v in self.options.items() if k in LIBPQ_ENV}

    def secret_env(self) -> dict[str, str]:
        """PGPASSWORD when there is a password: given to tools, never printed."""
        return {"PGPASSWORD": self.password} if self.password is not None else {}

    def psycopg_kwargs(self) -> dict[str, str | int]:
        kwargs: dict[str, str | int] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "dbname": self.dbname,
            **self.options,
        }
        if self.alternates:
            kwargs.update(self._multi_host())
        if self.password is not None:
            kwargs["password"] = self.password
        return kwargs


def conninfo_value(value: str) -> str:
    """A value of a libpq conninfo string, quoted when it has to be."""
    if value and not any(c in value for c in " '\\\t\n"):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class PlannedConnection(Connection):
    """A connection as --dry-run shows it before the server exists: the socket directory and
    port that start() will choose are placeholders."""

    port_text: str = "PORT"

    def pgbench_args(self) -> list[str]:
        return ["-h", self.host, "-p", self.port_text, "-U", self.user, self.dbname]


@dataclass(frozen=True)
class PlannedTarget:
    """A target as far as it is known before start(): what `--dry-run` prints and what the
    checks before a run read (a pod's host answers with placeholders until it is scheduled)."""

    host: Host
    connection: Connection | None  # a PlannedConnection: placeholders for what start decides
    scratch_dir: Path | None  # the directory start() will make on the storage under test
    # What start() runs before the steps, in order: (what, argv) (initdb, the server...)
    start: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # The objects start() creates, in order (Kubernetes manifests): JSON data, which
    # --dry-run prints as a YAML stream
    objects: tuple[Mapping[str, Any], ...] = ()
    # Where client-side workloads (pgbench) will run when not on `host` (a client pod)
    client: PlannedClient | None = None


@dataclass(frozen=True)
class PlannedClient:
    """A target's client as planned (issue 28): where pgbench and the round-trip probe run,
    what they dial, and the objects start() creates for it (a client pod's manifest)."""

    host: Host
    connection: Connection
    placement: str  # "pod", "same-pod", "tcp"...
    where: str  # for people: "pod howfast-1a2b3c4d-client"
    node: str | None = None  # the node asked (--client-node); None: the scheduler's choice
    objects: tuple[Mapping[str, Any], ...] = ()


class Target(ABC):
    """A place where PostgreSQL runs (or, for a storage probe, only storage). The runner calls
    check() for every target before the run starts, then start(), host(), the steps, and
    stop() in a finally block (stop must be idempotent).

    The base is what every target does. What only some can do (restart, a server log, a
    directory lock, pods...) is a capability, a Protocol in targets/capabilities.py that the
    target class subclasses and callers test with isinstance."""

    name: str
    kind: str

    @abstractmethod
    def check(self, *, will_init: bool) -> None:
        """Validate before anything is created; raise UsageError with the reason."""

    def check_inputs(self) -> None:
        """What the user gave that this target refuses, found by reading only: no lock taken,
        no server asked, nothing created. The run service calls it for every target of a
        run and of its --dry-run alike, before anything runs, so that a dry run refuses what
        the run would (issue 35); check() calls it too. The default refuses nothing."""
        return None

    @abstractmethod
    def start(self) -> Connection | None:
        """Provision or connect; return how to reach the server (None: a target with no
        server, such as a directory probed with fio only)."""

    @abstractmethod
    def stop(self) -> None:
        """Stop what start() started and remove what it created (unless kept). Idempotent."""

    @abstractmethod
    def record(self) -> TargetRecord:
        """What to store about the target: version, settings, devices (after start)."""

    @abstractmethod
    def planned(self) -> PlannedTarget:
        """What start() will make, as far as known before it runs; creates nothing."""

    @abstractmethod
    def host(self) -> Host:
        """Where this target's tools run and what its server's machine is. Known once the
        target started (a pod's host needs the pod); before, a target whose host depends on
        what start() makes answers with planned().host."""

    def start_warnings(self) -> tuple[str, ...]:
        """What check() and start() found worth saying (an earlier cluster left in the
        directory, logs on the storage under test); shown once the target is up."""
        return ()
