"""howfast's own database on a CloudNativePG cluster: its name, the statements that make,
mark and drop it, and the operator's `Database` resource that makes it where the published
user may not CREATE DATABASE. Pure: the executor (target.py) runs them and `--dry-run`
prints them.

Ownership is a comment on the database: `howfast: run TOKEN` (COMMENT ON DATABASE). A
database of that name without that comment is not howfast's and is refused, never dropped.
The application's databases (credentials.application_databases) are never named."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from howfast.errors import UsageError
from howfast.targets.cnpg.discovery import API_VERSION
from howfast.targets.k8s.names import labels

PREFIX = "howfast_"
# where howfast's own SQL connects to make, find and drop its database: never the
# application's (PUBLIC may connect to it by default, and it exists on every cluster)
ADMIN_DATABASE = "postgres"
MARK = "howfast: run "
_TOKEN = re.compile(r"^[0-9a-f]{8}$")

OWNERSHIP_QUERY = (
    "SELECT shobj_description(d.oid, 'pg_database') FROM pg_database d WHERE d.datname = %s"
)
MAY_CREATE_QUERY = "SELECT rolcreatedb OR rolsuper FROM pg_roles WHERE rolname = current_user"
LIST_OURS_QUERY = (
    "SELECT d.datname FROM pg_database d "
    "WHERE shobj_description(d.oid, 'pg_database') LIKE 'howfast: run %%'"
)


@dataclass(frozen=True)
class OwnDatabase:
    token: str
    owner: str  # the published user: pgbench's tables are its

    @property
    def name(self) -> str:
        return f"{PREFIX}{self.token}"

    @property
    def comment(self) -> str:
        return f"{MARK}{self.token}"


def own_database(token: str, owner: str, application: Sequence[str]) -> OwnDatabase:
    if not _TOKEN.match(token):
        raise ValueError(f"not a run token: {token!r}")
    db = OwnDatabase(token, owner)
    if db.name in application:  # a cluster whose application database is named like ours
        raise UsageError(f"howfast's database {db.name} is one of the application's databases")
    return db


def quoted(name: str) -> str:
    """An identifier, double-quoted (names here are howfast's own; quoting anyway)."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def create_statements(db: OwnDatabase) -> tuple[str, ...]:
    """By a user that may create databases (in autocommit: CREATE DATABASE refuses a
    transaction)."""
    return (f"CREATE DATABASE {quoted(db.name)}", *mark_statements(db))


def mark_statements(db: OwnDatabase) -> tuple[str, ...]:
    """The ownership mark; by its owner (the operator's Database resource made it)."""
    return (f"COMMENT ON DATABASE {quoted(db.name)} IS {literal(db.comment)}",)


def drop_statement(db_name: str) -> str:
    return f"DROP DATABASE IF EXISTS {quoted(db_name)} WITH (FORCE)"


def is_ours(comment: str | None, token: str | None = None) -> bool:
    """Whether a database's comment marks it as howfast's (of run `token`, when given)."""
    if comment is None or not comment.startswith(MARK):
        return False
    return token is None or comment == f"{MARK}{token}"


def refusal(db: OwnDatabase, exists: bool, comment: str | None) -> str | None:
    """Why howfast must not use a database of its name that exists (None: absent)."""
    if not exists:
        return None
    if is_ours(comment, db.token):
        return None
    return (
        f"a database {db.name} exists and is not howfast's (its comment: {comment!r}): "
        "howfast does not write in it nor drop it"
    )


def resource_name(token: str) -> str:
    return f"howfast-{token}-db"


def database_resource(
    db: OwnDatabase, cluster: str, namespace: str, owner_ref: dict[str, str] | None
) -> dict[str, Any]:
    """The operator's Database resource (api/v1/database_types.go) for a user that may not
    CREATE DATABASE: the operator makes it owned by the published user, and drops it when the
    resource is deleted (databaseReclaimPolicy: delete)."""
    meta: dict[str, Any] = {
        "name": resource_name(db.token),
        "namespace": namespace,
        "labels": labels(db.token),
    }
    if owner_ref is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Secret", "name": owner_ref["name"],
             "uid": owner_ref["uid"]}
        ]  # fmt: skip
    return {
        "apiVersion": API_VERSION,
        "kind": "Database",
        "metadata": meta,
        "spec": {
            "cluster": {"name": cluster},
            "name": db.name,
            "owner": db.owner,
            "ensure": "present",
            "databaseReclaimPolicy": "delete",
        },
    }


def resource_applied(resource: dict[str, Any]) -> tuple[bool | None, str | None]:
    """(status.applied, status.message) of a Database resource: None until reconciled."""
    status = resource.get("status") or {}
    applied = status.get("applied")
    return (applied if isinstance(applied, bool) else None), status.get("message")
