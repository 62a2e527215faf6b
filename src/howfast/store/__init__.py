"""Where results are kept: a SQLite file by default, or a PostgreSQL database.

Callers use `open_store(url)` and the `Store` interface; the rest is how it is done.
"""

from __future__ import annotations

from collections.abc import Sequence

from howfast.errors import HowfastError
from howfast.store.base import Store
from howfast.store.location import (
    ENV_VAR,
    StoreLocation,
    default_store_location,
    default_store_path,
    parse_store_url,
    resolve_store_location,
)
from howfast.store.migrations import MIGRATIONS, SCHEMA_VERSION, Migration
from howfast.store.sql import SqlStore

__all__ = [
    "ENV_VAR",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Migration",
    "SqlStore",
    "Store",
    "StoreLocation",
    "default_store_location",
    "default_store_path",
    "open_store",
    "parse_store_url",
    "resolve_store_location",
]


def open_store(url: str | None = None, *, migrations: Sequence[Migration] = MIGRATIONS) -> SqlStore:
    """Open (creating or migrating) the store: `url`, else `$HOWFAST_STORE`, else the default
    SQLite file. Accepts a file path, `sqlite:///path` or `postgresql://…`.

    Raises UsageError for a URL that cannot be used and HowfastError when the store cannot be
    opened; neither message contains a password."""
    location = resolve_store_location(url)
    if location.is_default and location.sqlite_path is not None:
        directory = location.sqlite_path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HowfastError(
                f"cannot create the results directory {directory}: {exc.strerror}",
                hint=f"set --store or ${ENV_VAR} to a file elsewhere",
            ) from None
    return SqlStore(location, migrations)
