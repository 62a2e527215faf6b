"""The queries a cnpg:// target asks an instance (targets/cnpg/forwards.py: whether it is a
primary serving, on which timeline, since when; the primary's view of its standbys) run on
a real server, as a superuser and as a user with no privilege, as the application user a
CloudNativePG cluster publishes is."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.cnpg.forwards import LAG_QUERY, SERVING_QUERY
from howfast.targets.dsn import parse_dsn
from tests.conftest import PgServer


@pytest.fixture
def plain_user(pg_server: PgServer) -> Iterator[Connection]:
    pg_server.psql("CREATE ROLE howfast_plain_test LOGIN PASSWORD 'plain-pw'")
    try:
        yield replace(parse_dsn(pg_server.dsn), user="howfast_plain_test", password="plain-pw")
    finally:
        pg_server.psql("DROP ROLE IF EXISTS howfast_plain_test")


def test_a_primary_says_it_serves_its_timeline_and_start_to_any_user(
    pg_server: PgServer, plain_user: Connection
) -> None:
    for conn in (parse_dsn(pg_server.dsn), plain_user):
        with pgquery.connect(conn) as db:
            row = db.execute(SERVING_QUERY).fetchone()
        assert row is not None
        in_recovery, started, timeline = row
        assert in_recovery is False and isinstance(started, str) and int(str(timeline)) >= 1


def test_the_standbys_view_answers_without_standbys(
    pg_server: PgServer, plain_user: Connection
) -> None:
    with pgquery.connect(plain_user) as db:
        assert db.execute(LAG_QUERY).fetchall() == []
