"""Where results are kept: a SQLite file by default, or a PostgreSQL database.

Callers use `open_store(url)` and the `Store` interface; the rest is how it is done.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from howfast.errors import HowfastError
from howfast.store.location import (
    ENV_VAR,
    StoreLocation,
    default_store_location,
    default_store_path,
    parse_store_url,
    read_only_location,
    resolve_store_location,
    sqlite_writable,
)

if TYPE_CHECKING:
    from howfast.store.base import Store
    from howfast.store.migrations import MIGRATIONS, SCHEMA_VERSION, Migration
    from howfast.store.sql import SqlStore

# Loaded on first use (PEP 562): importing howfast.store.base or .location must not load
# SQLAlchemy, which a command that fails on its arguments never needs.
_LAZY = {
    "Store": "howfast.store.base",
    "MIGRATIONS": "howfast.store.migrations",
    "SCHEMA_VERSION": "howfast.store.migrations",
    "Migration": "howfast.store.migrations",
    "SqlStore": "howfast.store.sql",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'howfast.store' has no attribute {name!r}")


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


def open_store(
    url: str | None = None,
    *,
    migrations: Sequence[Migration] | None = None,
    reading: bool = False,
    environ: Mapping[str, str] | None = None,
) -> SqlStore:
    """Open (creating or migrating) the store: `url`, else `$HOWFAST_STORE` (of `environ`,
    default this process's), else the default SQLite file. Accepts a file path,
    `sqlite:///path` or `postgresql://…`. `reading`: for a command that only reads, a SQLite
    file that cannot be written (a read-only mount, another user's file) is opened read-only
    instead of refused.

    Raises UsageError for a URL that cannot be used and HowfastError when the store cannot be
    opened; neither message contains a password."""
    location = resolve_store_location(url, environ)
    if location.is_default and location.sqlite_path is not None:
        directory = location.sqlite_path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HowfastError(
                f"cannot create the results directory {directory}: {exc.strerror}",
                hint=f"set --store or ${ENV_VAR} to a file elsewhere",
            ) from None
    path = location.sqlite_path
    if path is not None and not sqlite_writable(path):
        if reading and path.exists():
            location = read_only_location(location)
        else:
            raise HowfastError(
                f"the results store {location.display} cannot be written (a read-only "
                "filesystem, or a file or directory this user cannot write)",
                hint="give a store on writable storage with --store"
                + (
                    "; reading it works: results, compare, report and export open it read-only"
                    if path.exists()
                    else ""
                ),
            )
    from howfast.store.migrations import MIGRATIONS
    from howfast.store.sql import SqlStore

    return SqlStore(location, MIGRATIONS if migrations is None else migrations)
