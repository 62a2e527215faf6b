"""The Target interface: provision or reach a PostgreSQL server, describe it, stop it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from howfast.machine.cgroup import MemoryCgroup
from howfast.model import TargetRecord

if TYPE_CHECKING:
    from howfast.hosts.base import Host
    from howfast.machine.pgbin import PgInstall
    from howfast.machine.serverio import ServerIo


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

    def pgbench_args(self) -> list[str]:
        """Connection arguments for pgbench/psql; the password is not among them."""
        return ["-h", self.host, "-p", str(self.port), "-U", self.user, self.dbname]

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
        if self.password is not None:
            kwargs["password"] = self.password
        return kwargs


@dataclass(frozen=True)
class PlannedConnection(Connection):
    """A connection as --dry-run shows it before the server exists: the socket directory and
    port that start() will choose are placeholders."""

    port_text: str = "PORT"

    def pgbench_args(self) -> list[str]:
        return ["-h", self.host, "-p", self.port_text, "-U", self.user, self.dbname]


class Target(ABC):
    """A place where PostgreSQL runs. The runner calls check() for every target before the run
    starts, then start(), the steps, and stop() in a finally block (stop must be idempotent)."""

    name: str
    kind: str

    @abstractmethod
    def check(self, *, will_init: bool) -> None:
        """Validate before anything is created; raise UsageError with the reason."""

    @abstractmethod
    def start(self) -> Connection | None:
        """Provision or connect; return how to reach the server (None: a target with no
        server, such as a directory probed with fio only)."""

    @abstractmethod
    def host(self, install: PgInstall) -> Host:
        """Where this target's tools run and what its server's machine is (a LocalHost for
        this machine, with PostgreSQL's programs from `install`)."""

    def planned_connection(self) -> Connection | None:
        """How clients will reach the server, as far as it is known before start() (for
        --dry-run); parts decided at start are shown as placeholders."""
        return None

    def planned_scratch_dir(self) -> Path | None:
        """The scratch directory start() will create, for --dry-run."""
        return self.scratch_dir()

    @abstractmethod
    def record(self) -> TargetRecord:
        """What to store about the target: version, settings, devices (after start)."""

    @abstractmethod
    def stop(self) -> None:
        """Stop what start() started and remove what it created (unless kept). Idempotent."""

    def note_run(self, run_id: int) -> None:
        """The run this target belongs to, once it is created (a directory target records it
        beside its lock, for the message another howfast gives)."""
        del run_id  # nothing to record for other targets

    def alive(self) -> bool:
        """Whether the server still runs (a local target checks its postmaster)."""
        return True

    def server_log_tail(self, lines: int = 20) -> str | None:
        """The last lines of the server log, when howfast has it."""
        return None

    def scratch_dir(self) -> Path | None:
        """A directory on the storage under test for file-based probes (fio), if any."""
        return None

    def storage_paths(self) -> dict[str, Path]:
        """The paths whose block devices the samplers watch, by role ("data", "wal").
        By default the scratch directory, as the data role."""
        scratch = self.scratch_dir()
        return {"data": scratch} if scratch is not None else {}

    def server_log_file(self) -> Path | None:
        """The server's log file while it runs, when howfast writes it (local clusters)."""
        return None

    def restart(self) -> str | None:
        """Stop and start the server again (its shared_buffers start empty). Returns None
        when done, else why not: an existing server is not howfast's to restart."""
        return f"{self.kind} targets cannot be restarted by howfast"

    def memory_cgroup(self) -> MemoryCgroup | None:
        """The memory-limited cgroup the server runs in (`--memory`), if any."""
        return None

    def server_io(self) -> ServerIo | None:
        """Where PostgreSQL's own I/O can be read (its I/O cgroup, its processes): only for a
        server howfast started on this machine."""
        return None

    def apply_step_settings(self, settings: dict[str, str]) -> str | None:
        """Make `settings` (postgresql.conf names and values) the ones in force for the next
        step, over the plan's; an empty dict goes back to the plan's. Returns None when
        applied, else why not (an existing server keeps its own settings)."""
        return f"{self.kind} targets keep their own settings"
