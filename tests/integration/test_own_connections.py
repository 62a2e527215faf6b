"""The samplers' connections kept between the steps of a target (samplers/own_connection.py),
on a real server: handed out again only to the same sampler and server, once it answered,
with no prepared statement left; a connection the server ended is not handed out; close()
ends every kept one."""

from __future__ import annotations

import time

import psycopg
import pytest

from howfast.samplers.own_connection import OwnConnection, OwnConnections
from howfast.samplers.prepared import prepare, text_rows
from howfast.targets.base import Connection
from tests.conftest import PgServer

pytestmark = pytest.mark.integration


def _server(pg: PgServer) -> Connection:
    return Connection("127.0.0.1", pg.port, pg.user, "postgres", pg.password)


def _backends(pg: PgServer, application: str) -> set[int]:
    out = pg.psql(f"SELECT pid FROM pg_stat_activity WHERE application_name = '{application}'")
    return {int(line) for line in out.split()}


def _pid(db: psycopg.Connection[tuple[object, ...]]) -> int:
    row = db.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(str(row[0]))


def _gone(pg: PgServer, application: str, timeout_s: float = 10) -> bool:
    deadline = time.monotonic() + timeout_s
    while _backends(pg, application):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_connection_given_back_serves_the_next_step_of_the_same_sampler(
    pg_server: PgServer,
) -> None:
    pool = OwnConnections()
    server = _server(pg_server)
    first = OwnConnection("howfast-test-pool", "2s")
    db = first.open(server, pool)
    pid = _pid(db)
    prepare(db.pgconn, b"reading", "SELECT 1")
    first.release(reusable=True)
    assert _backends(pg_server, "howfast-test-pool") == {pid}  # kept, not closed

    # Another sampler's name, or the same name with another timeout: a connection of its own.
    other = OwnConnection("howfast-test-other", "2s")
    assert _pid(other.open(server, pool)) != pid
    other.close()
    longer = OwnConnection("howfast-test-pool", "5s")
    assert _pid(longer.open(server, pool)) != pid
    longer.close()

    second = OwnConnection("howfast-test-pool", "2s")
    again = second.open(server, pool)
    assert _pid(again) == pid
    row = again.execute("SHOW statement_timeout").fetchone()
    assert row is not None and row[0] == "2s"
    prepare(again.pgconn, b"reading", "SELECT 2")  # deallocated when given back
    assert text_rows(again.pgconn, b"reading") == [("2",)]
    second.release(reusable=False)  # a sampler thread still running: closed, never shared
    assert _gone(pg_server, "howfast-test-pool")
    pool.close()


def test_a_connection_the_server_ended_is_replaced_and_close_ends_the_kept_ones(
    pg_server: PgServer,
) -> None:
    pool = OwnConnections()
    server = _server(pg_server)
    sampler = OwnConnection("howfast-test-ended", "2s")
    pid = _pid(sampler.open(server, pool))
    sampler.release(reusable=True)
    pg_server.psql(f"SELECT pg_terminate_backend({pid})")  # as a restart between steps does
    assert _gone(pg_server, "howfast-test-ended")
    fresh = sampler.open(server, pool)
    assert _pid(fresh) != pid
    new_pid = _pid(fresh)
    sampler.release(reusable=True)
    assert _backends(pg_server, "howfast-test-ended") == {new_pid}
    pool.close()
    assert _gone(pg_server, "howfast-test-ended")
    # given back after close(): closed at once
    late = OwnConnection("howfast-test-ended", "2s")
    late.open(server, pool)
    late.release(reusable=True)
    assert _gone(pg_server, "howfast-test-ended")
