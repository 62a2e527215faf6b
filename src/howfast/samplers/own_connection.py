"""The connection a PostgreSQL sampler reads through: its own, to the server howfast's
connections reach now (after a failover, the promoted standby), in autocommit so that each
reading sees the present rather than a snapshot, named so that the other samplers and the
analysis leave it out (`howfast-...`), and never stuck on a query (a statement timeout).

A target's samplers keep their connections from one step to the next (OwnConnections, one
per target, closed before the target stops): on Kubernetes each new connection goes
through the port-forward and the server's authentication, ~0.09 s that every step waited
for at its start (issue 34). A connection is handed out again only once it has answered a
query, with its prepared statements deallocated, to the sampler of the same name and server.
"""

from __future__ import annotations

import contextlib
import threading

import psycopg
from psycopg import pq

from howfast.targets import pgquery
from howfast.targets.base import Connection

CONNECT_TIMEOUT_S = 5
DB = psycopg.Connection[tuple[object, ...]]
# (the server: host, port, user, database, options, alternates; the sampler's name, timeout)
Key = tuple[object, ...]


def _key(server: Connection, application: str, statement_timeout: str) -> Key:
    options = tuple(sorted(server.options.items()))
    return (server.host, server.port, server.user, server.dbname, options, server.alternates,
            application, statement_timeout)  # fmt: skip


def _close(db: DB) -> None:
    with contextlib.suppress(psycopg.Error):
        db.close()


class OwnConnections:
    """The samplers' connections between the steps of one target, by sampler and server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[Key, DB] = {}
        self._closed = False

    def take(self, key: Key) -> DB | None:
        """The idle connection kept for `key`, once it answered; None when there is none or
        it no longer answers (the server restarted between the steps: it is closed)."""
        with self._lock:
            db = self._idle.pop(key, None)
        if db is None:
            return None
        try:
            db.execute("SELECT 1")
        except psycopg.Error:
            _close(db)
            return None
        return db

    def give_back(self, key: Key, db: DB) -> None:
        """Keep `db` for the next step when it is idle and sound, else close it."""
        try:
            if db.closed or db.broken or db.pgconn.transaction_status != pq.TransactionStatus.IDLE:
                raise psycopg.OperationalError("not reusable")
            db.execute("DEALLOCATE ALL")  # psycopg forgets its own prepared statements too
        except psycopg.Error:
            _close(db)
            return
        with self._lock:
            keep = not self._closed and key not in self._idle
            if keep:
                self._idle[key] = db
        if not keep:
            _close(db)

    def close(self) -> None:
        """Close every idle connection; any given back later is closed."""
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle.values()), {}
        for db in idle:
            _close(db)


class OwnConnection:
    """One sampler's connection: opened (or taken from the target's OwnConnections), closed
    when an event cut it, given back when the sampler stopped with its thread ended."""

    def __init__(self, application: str, statement_timeout: str) -> None:
        self.application = application
        self.statement_timeout = statement_timeout
        self.db: DB | None = None
        self.server: Connection | None = None  # the server it reaches
        self._pool: OwnConnections | None = None

    def open(self, server: Connection | None, pool: OwnConnections | None) -> DB:
        """A connection to `server`, the one howfast's connections reach now (the one held
        before, if any, is closed: an event cut it), taken from `pool` when it keeps one."""
        self.close()
        if server is None:
            raise RuntimeError("no server")
        self._pool = pool
        key = _key(server, self.application, self.statement_timeout)
        db = self._pool.take(key) if self._pool is not None else None
        if db is None:
            # Named from the start: the samplers connect side by side, and one counting the
            # other sessions (pgstats) must not count another's before it is named.
            db = pgquery.connect(
                server, timeout_s=CONNECT_TIMEOUT_S, application_name=self.application
            )
            db.autocommit = True
            db.execute(f"SET statement_timeout = '{self.statement_timeout}'")
        self.db, self.server = db, server
        return db

    def close(self) -> None:
        db, self.db = self.db, None
        if db is not None:
            _close(db)

    def release(self, reusable: bool) -> None:
        """After the sampler's last reading: back to the target's connections when
        `reusable` (no thread of the sampler still reads through it), else closed."""
        db, self.db = self.db, None
        if db is None:
            return
        if reusable and self._pool is not None and self.server is not None:
            self._pool.give_back(_key(self.server, self.application, self.statement_timeout), db)
        else:
            _close(db)
