"""The connection a PostgreSQL sampler reads through: its own, to the server howfast's
connections reach now (after a failover, the promoted standby), in autocommit so that each
reading sees the present rather than a snapshot, named so that the other samplers and the
analysis leave it out (`howfast-...`), and never stuck on a query (a statement timeout)."""

from __future__ import annotations

import psycopg

from howfast.samplers.base import SamplerContext
from howfast.targets import pgquery
from howfast.targets.base import Connection

CONNECT_TIMEOUT_S = 5


def open_own(
    ctx: SamplerContext, application: str, statement_timeout: str
) -> tuple[psycopg.Connection[tuple[object, ...]], Connection]:
    """A new connection for `application` and the server it reaches."""
    connection = ctx.current_connection()
    if connection is None:
        raise RuntimeError("no server")
    # Named from the start: the samplers connect side by side, and one counting the other
    # sessions (pgstats) must not count another's before it is named.
    db = pgquery.connect(connection, timeout_s=CONNECT_TIMEOUT_S, application_name=application)
    db.autocommit = True
    db.execute(f"SET statement_timeout = '{statement_timeout}'")
    return db, connection
