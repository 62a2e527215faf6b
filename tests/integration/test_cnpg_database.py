"""howfast's own database on a real PostgreSQL server, through the statements a cnpg://
target runs on the primary (targets/cnpg/dbwork.py): made and marked, found again as its
own, refused when one of its name is not howfast's, dropped only when its comment says this
run, and the operator's path taken for a user that may not create databases. (The operator
itself is not here: `via_operator` is replaced by a function that records it was asked and
makes the database as the operator would, owned by the user.)"""

from __future__ import annotations

from dataclasses import replace

import pytest

from howfast.errors import HowfastError
from howfast.targets.base import Connection
from howfast.targets.cnpg import database as d
from howfast.targets.cnpg import dbwork
from howfast.targets.dsn import parse_dsn
from tests.conftest import PgServer


def admin_of(server: PgServer) -> Connection:
    return parse_dsn(server.dsn)


def never() -> None:
    raise AssertionError("the operator was asked though the user may create databases")


def test_made_marked_and_dropped_only_by_the_run_that_made_it(pg_server: PgServer) -> None:
    admin = admin_of(pg_server)
    own = d.own_database("0a0b0c0d", "bench", ("app", "postgres"))
    assert dbwork.create(admin, own, never) == "sql"
    assert dbwork.comment_of(admin, own.name) == (True, "howfast: run 0a0b0c0d")
    assert dbwork.create(admin, own, never) == "sql"  # its own, again: used
    # marked by another run: this one does not drop it
    pg_server.psql(f"COMMENT ON DATABASE \"{own.name}\" IS 'howfast: run ffffffff'")
    dbwork.drop(admin, own, "sql", never)
    assert dbwork.comment_of(admin, own.name) == (True, "howfast: run ffffffff")
    dbwork.drop(admin, d.OwnDatabase("1a1a1a1a", "bench"), "sql", never)  # absent: nothing
    pg_server.psql(f"COMMENT ON DATABASE \"{own.name}\" IS 'howfast: run 0a0b0c0d'")
    dbwork.drop(admin, own, "sql", never)
    assert dbwork.comment_of(admin, own.name) == (False, None)


def test_a_database_of_its_name_that_is_not_howfast_s_is_refused_and_kept(
    pg_server: PgServer,
) -> None:
    admin = admin_of(pg_server)
    own = d.own_database("0e0e0e0e", "bench", ())
    pg_server.psql(f'CREATE DATABASE "{own.name}"')
    try:
        pg_server.psql(f"COMMENT ON DATABASE \"{own.name}\" IS 'the shop''s orders'")
        with pytest.raises(HowfastError, match="is not howfast's"):
            dbwork.create(admin, own, never)
        dbwork.drop(admin, own, "sql", never)
        assert dbwork.comment_of(admin, own.name) == (True, "the shop's orders")
    finally:
        pg_server.psql(f'DROP DATABASE IF EXISTS "{own.name}"')


def test_a_user_that_may_not_create_databases_goes_through_the_operator(
    pg_server: PgServer,
) -> None:
    admin = admin_of(pg_server)
    pg_server.psql("CREATE ROLE howfast_app_test LOGIN PASSWORD 'app-test-pw' NOCREATEDB")
    app = replace(admin, user="howfast_app_test", password="app-test-pw")
    own = d.own_database("0f0f0f0f", "howfast_app_test", ())
    asked: list[str] = []

    def operator() -> None:  # what the operator's Database resource does: made, owned
        asked.append(own.name)
        pg_server.psql(f'CREATE DATABASE "{own.name}" OWNER howfast_app_test')

    try:
        assert not dbwork.may_create(app)
        assert dbwork.create(app, own, operator) == "resource"
        assert asked == [own.name]
        # the owner marked it: found as howfast's
        assert dbwork.comment_of(app, own.name) == (True, "howfast: run 0f0f0f0f")
        deleted: list[bool] = []
        dbwork.drop(app, own, "resource", lambda: deleted.append(True))
        assert deleted == [True]  # the resource goes; the operator drops the database
    finally:
        pg_server.psql(f'DROP DATABASE IF EXISTS "{own.name}"')
        pg_server.psql("DROP ROLE IF EXISTS howfast_app_test")
