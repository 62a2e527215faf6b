"""howfast's own database on a CloudNativePG cluster: its statements, its mark, the refusal
of a database that is not howfast's, and the operator's Database resource (built as the
v1.27.1 API types say: api/v1/database_types.go). Run on a real server:
tests/integration/test_cnpg_database.py."""

from __future__ import annotations

import pytest

from howfast.errors import UsageError
from howfast.targets.cnpg import database as d


def own() -> d.OwnDatabase:
    return d.own_database("1a2b3c4d", "app", ("app", "postgres"))


def test_the_statements_make_mark_and_drop_only_its_own_name() -> None:
    db = own()
    assert db.name == "howfast_1a2b3c4d"
    assert d.create_statements(db) == (
        'CREATE DATABASE "howfast_1a2b3c4d"',
        "COMMENT ON DATABASE \"howfast_1a2b3c4d\" IS 'howfast: run 1a2b3c4d'",
    )
    assert d.drop_statement(db.name) == 'DROP DATABASE IF EXISTS "howfast_1a2b3c4d" WITH (FORCE)'


def test_a_database_of_its_name_is_used_only_when_its_comment_says_this_run() -> None:
    db = own()
    assert d.refusal(db, False, None) is None
    assert d.refusal(db, True, "howfast: run 1a2b3c4d") is None
    refused = d.refusal(db, True, "orders of 2025")
    assert refused is not None and "is not howfast's" in refused
    assert d.refusal(db, True, "howfast: run ffffffff") is not None  # another run's
    assert d.refusal(db, True, None) is not None
    assert d.is_ours("howfast: run ffffffff") and not d.is_ours("howfast, run x")


def test_a_token_is_checked_and_an_application_database_of_its_name_refused() -> None:
    with pytest.raises(ValueError, match="not a run token"):
        d.own_database("x'; DROP", "app", ())
    with pytest.raises(UsageError, match="is one of the application's databases"):
        d.own_database("1a2b3c4d", "app", ("howfast_1a2b3c4d",))


def test_quoting_doubles_quotes() -> None:
    assert d.quoted('a"b') == '"a""b"'
    assert d.literal("it's") == "'it''s'"


def test_the_database_resource_is_labelled_owned_and_dropped_with_it() -> None:
    resource = d.database_resource(own(), "pg", "lab", {"name": "howfast-1a2b3c4d", "uid": "u"})
    assert resource["apiVersion"] == "postgresql.cnpg.io/v1" and resource["kind"] == "Database"
    meta = resource["metadata"]
    assert meta["name"] == "howfast-1a2b3c4d-db" and meta["namespace"] == "lab"
    assert meta["labels"] == {"app.kubernetes.io/managed-by": "howfast",
                              "howfast.dev/run": "1a2b3c4d"}  # fmt: skip
    assert meta["ownerReferences"][0]["name"] == "howfast-1a2b3c4d"
    assert resource["spec"] == {
        "cluster": {"name": "pg"}, "name": "howfast_1a2b3c4d", "owner": "app",
        "ensure": "present", "databaseReclaimPolicy": "delete",
    }  # fmt: skip
    assert d.resource_applied(resource) == (None, None)
    assert d.resource_applied({"status": {"applied": False, "message": "no"}}) == (False, "no")
