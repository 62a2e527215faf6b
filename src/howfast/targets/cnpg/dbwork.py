"""Making and dropping howfast's own database on the primary (database.py builds the
statements and the Database resource): a thin executor. SQL goes through howfast's
port-forward to the primary as the published user; where that user may not create
databases, the operator makes it from a Database resource and the owner marks it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

from howfast.errors import HowfastError
from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.cnpg import database as d
from howfast.targets.cnpg.api import CnpgApi

Made = Literal["sql", "resource"]
RESOURCE_TIMEOUT_S = 120.0


def comment_of(admin: Connection, name: str) -> tuple[bool, str | None]:
    """(exists, its comment)."""
    with pgquery.connect(admin) as db:
        row = db.execute(d.OWNERSHIP_QUERY, (name,)).fetchone()
    return (row is not None), (None if row is None else _text(row[0]))


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def may_create(admin: Connection) -> bool:
    with pgquery.connect(admin) as db:
        row = db.execute(d.MAY_CREATE_QUERY).fetchone()
    return bool(row and row[0])


def create(admin: Connection, own: d.OwnDatabase, via_operator: Callable[[], None]) -> Made:
    """The database, marked as howfast's; refused when one of its name is not howfast's.
    `via_operator` makes it through the operator when the user may not create databases."""
    exists, comment = comment_of(admin, own.name)
    problem = d.refusal(own, exists, comment)
    if problem is not None:
        raise HowfastError(problem)
    if exists:
        return "sql"  # ours, of this run: made before a retry
    if may_create(admin):
        with pgquery.connect(admin) as db:
            for statement in d.create_statements(own):
                db.execute(statement.encode())
        return "sql"
    via_operator()
    with pgquery.connect(replace(admin, dbname=own.name)) as db:
        for statement in d.mark_statements(own):
            db.execute(statement.encode())
    return "resource"


def via_operator(api: CnpgApi, resource: dict[str, Any], own: d.OwnDatabase) -> None:
    """The operator's Database resource, created and waited for until applied."""
    api.create_database(resource)
    _wait_applied(api, str(resource["metadata"]["namespace"]), own)


def _wait_applied(api: CnpgApi, namespace: str, own: d.OwnDatabase) -> None:
    name = d.resource_name(own.token)
    deadline = time.monotonic() + RESOURCE_TIMEOUT_S
    message = None
    while time.monotonic() < deadline:
        applied, message = d.resource_applied(api.read_database(namespace, name) or {})
        if applied:
            return
        if applied is False and message:
            raise HowfastError(f"the operator did not create database {own.name}: {message}")
        time.sleep(0.5)
    raise HowfastError(
        f"the operator did not create database {own.name} within {RESOURCE_TIMEOUT_S:.0f} s"
        + (f": {message}" if message else "")
    )


def drop(
    admin: Connection, own: d.OwnDatabase, made: Made | None, delete_resource: Callable[[], None]
) -> None:
    """Drop it if it is howfast's (its comment says this run's token); never another. One
    the operator made goes with its resource (reclaim policy: delete)."""
    if made == "resource":
        delete_resource()
        return
    exists, comment = comment_of(admin, own.name)
    if exists and d.is_ours(comment, own.token):
        with pgquery.connect(admin) as db:
            db.execute(d.drop_statement(own.name).encode())
