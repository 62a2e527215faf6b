"""SQLAlchemy engines for the two backends, write transactions, and readable errors."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from howfast.errors import HowfastError
from howfast.model import JSONValue
from howfast.redact import redact_text
from howfast.store.location import StoreLocation

# Execution option set on connections that are about to write (see write_transaction).
_WRITE_OPTION = "howfast_write"
SQLITE_BUSY_TIMEOUT_S = 30.0  # how long a writer waits for another writer's commit
PG_CONNECT_TIMEOUT_S = 10


def make_engine(location: StoreLocation) -> Engine:
    """An engine for the location; it does not connect yet."""
    if location.sqlite_path is not None:
        return _sqlite_engine(location)
    connect_args: dict[str, Any] = {}
    # The user's own URL parameters win over these defaults.
    if "connect_timeout" not in location.url.query:
        connect_args["connect_timeout"] = PG_CONNECT_TIMEOUT_S
    if "application_name" not in location.url.query:
        connect_args["application_name"] = "howfast"
    return create_engine(
        location.url,
        connect_args=connect_args,
        json_serializer=dumps_json,
        # A run can sit idle for hours between steps; the server may have closed the connection.
        pool_pre_ping=True,
    )


def _sqlite_engine(location: StoreLocation) -> Engine:
    engine = create_engine(
        location.url,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S},
        json_serializer=dumps_json,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take BEGIN away from the sqlite3 module, which skips it for DDL and SELECT: migrations
        # must be atomic and reads must see one snapshot. _on_begin below emits it instead.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        # WAL lets `results list` read while a run writes. Cascades need foreign keys on.
        if not location.read_only:  # setting the journal mode writes the file
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        # Writers take the write lock up front, so they wait (busy timeout) rather than fail
        # when a read snapshot cannot be upgraded; readers never take it.
        immediate = connection.get_execution_options().get(_WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """One transaction that commits when the block ends, or rolls back on an exception."""
    with engine.connect() as connection:
        connection.execution_options(**{_WRITE_OPTION: True})
        with connection.begin():
            yield connection


def dumps_json(value: JSONValue) -> str:
    """JSON for the database. NaN and infinity are not JSON (PostgreSQL's json type rejects
    them), so they are stored as null."""
    try:
        return json.dumps(value, allow_nan=False, ensure_ascii=False)
    except ValueError:
        return json.dumps(_finite(value), allow_nan=False, ensure_ascii=False)


def _finite(value: JSONValue) -> JSONValue:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def store_error(doing: str, exc: SQLAlchemyError, location: StoreLocation) -> HowfastError:
    """A one-line error naming the store without its password, from a driver error."""
    # The driver's own words: SQLAlchemy's text adds the statement, its parameters and a link.
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        text = str(exc.orig)
    else:
        lines = str(exc).splitlines()
        text = lines[0] if lines else type(exc).__name__
    one_line = " ".join(part.strip() for part in text.splitlines() if part.strip())
    message = f"cannot {doing} the results store {location.display}: {one_line}"
    return HowfastError(redact_text(message, location.password))
