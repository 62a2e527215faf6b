"""Where results go: turn `--store`, `$HOWFAST_STORE` or the default into a SQLAlchemy URL.

Pure apart from reading the environment (the one given, else this process's) and the file
system; opening happens in engine.py.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from howfast.errors import UsageError
from howfast.redact import redact_dsn

if TYPE_CHECKING:  # SQLAlchemy loads when a store is resolved, not when this module is
    from sqlalchemy.engine import URL

ENV_VAR = "HOWFAST_STORE"
DEFAULT_FILENAME = "howfast.db"
POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
POSTGRES_DRIVER = "postgresql+psycopg"  # psycopg 3; SQLAlchemy's plain "postgresql" means psycopg2

_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://")
# "host=db dbname=results": a libpq key=value string, which would otherwise pass for a file name.
_CONNINFO = re.compile(r"^(host|hostaddr|port|dbname|user|password|service)\s*=", re.IGNORECASE)


@dataclass(frozen=True)
class StoreLocation:
    """A store to open: the URL to connect to and how to show it to people."""

    url: URL
    # The URL or path without its password, for messages and `results list` headers.
    display: str
    # The SQLite file, or None for PostgreSQL.
    sqlite_path: Path | None = None
    # True for the default file: its directory is created on first use.
    is_default: bool = False
    # Opened only to read (a SQLite file that cannot be written): nothing is migrated.
    read_only: bool = False

    @property
    def password(self) -> str | None:
        return self.url.password


def default_store_path() -> Path:
    """The SQLite file used when neither `--store` nor `$HOWFAST_STORE` is given."""
    import platformdirs  # here: `--help` loads this module, and needs no data directory

    return Path(platformdirs.user_data_dir("howfast")) / DEFAULT_FILENAME


def default_store_location(environ: Mapping[str, str] | None = None) -> str:
    """Where results go when no URL is given: `$HOWFAST_STORE` (redacted) or the default file."""
    from_env = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    return redact_dsn(from_env) if from_env else str(default_store_path())


def resolve_store_location(
    url: str | None, environ: Mapping[str, str] | None = None
) -> StoreLocation:
    """Apply the resolution order: explicit URL, then `$HOWFAST_STORE` (of `environ`, else of
    this process), then the default file."""
    if url is not None and url.strip():
        return parse_store_url(url)
    from_env = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    if from_env:
        return parse_store_url(from_env, origin=f"${ENV_VAR}")
    path = default_store_path()
    return StoreLocation(
        url=_sqlite_url(path),
        display=str(path),
        sqlite_path=path,
        is_default=True,
    )


def plain_sqlite_file(url: str | None, environ: Mapping[str, str] | None = None) -> Path | None:
    """The existing SQLite file that resolve_store_location gives when the store is a plain
    file path (in `url`, else `$HOWFAST_STORE`, else the default file), found without
    SQLAlchemy; None for every other store (a sqlite:// or postgresql:// URL, a file that
    does not exist yet), which resolve_store_location itself must resolve."""
    text = url.strip() if url is not None and url.strip() else ""
    if not text:
        text = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    if not text:
        path = default_store_path()
    elif _SCHEME.match(text) or _CONNINFO.match(text):
        return None
    else:
        path = Path(text).expanduser().resolve()
    return path if path.is_file() else None


def parse_store_url(text: str, *, origin: str = "the store URL") -> StoreLocation:
    """Accept a file path, `sqlite:///relative` or `sqlite:////absolute`, or `postgresql://…`."""
    text = text.strip()
    if not text:
        raise UsageError(f"{origin} is empty")
    match = _SCHEME.match(text)
    if match is None:
        if _CONNINFO.match(text):
            raise UsageError(
                f"{origin} looks like a key=value connection string: {redact_dsn(text)}",
                hint="give the store as a URL, postgresql://user@host:port/dbname",
            )
        return _sqlite_location(Path(text), origin)
    scheme = match["scheme"].lower()
    if scheme == "sqlite":
        database = _make_url(text, origin).database
        if not database or database == ":memory:":
            raise UsageError(
                f"{origin} {text!r} names no file",
                hint="use sqlite:///relative/path.db or sqlite:////absolute/path.db",
            )
        return _sqlite_location(Path(database), origin)
    if scheme in POSTGRES_SCHEMES:
        url = _make_url(text, origin).set(drivername=POSTGRES_DRIVER)
        return StoreLocation(url=url, display=redact_dsn(text))
    raise UsageError(
        f"{origin} has an unsupported scheme {scheme!r}: {redact_dsn(text)}",
        hint="use a file path, sqlite:///path or postgresql://user@host/db",
    )


def _sqlite_url(path: Path) -> URL:
    from sqlalchemy.engine import URL

    return URL.create("sqlite", database=str(path))


def _make_url(text: str, origin: str) -> URL:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(text)
    except (ArgumentError, ValueError):
        pass  # the parser's message quotes the URL, password and all: say it ourselves, unchained
    raise UsageError(f"{origin} is not a valid URL: {redact_dsn(text)}")


def _sqlite_location(path: Path, origin: str) -> StoreLocation:
    path = path.expanduser().resolve()
    if path.is_dir():
        raise UsageError(f"{origin} {path} is a directory", hint="name a file, e.g. results.db")
    if path.exists() and not path.is_file():  # resolve() followed any link
        # SQLite would write into a device or a FIFO, and leave its journal beside it
        raise UsageError(
            f"{origin} {path} is not a regular file (a device, a FIFO or a socket)",
            hint="name a SQLite file or a new name, e.g. results.db",
        )
    if not path.parent.is_dir():
        raise UsageError(
            f"{origin} {path}: directory {path.parent} does not exist",
            hint="create it first, or pick another path",
        )
    return StoreLocation(url=_sqlite_url(path), display=str(path), sqlite_path=path)


def on_read_only_filesystem(path: Path) -> bool:
    """Whether the filesystem holding `path` (or its directory) is mounted read-only."""
    for candidate in (path, path.parent):
        try:
            return bool(os.statvfs(candidate).f_flag & os.ST_RDONLY)
        except OSError:
            continue
    return False


def sqlite_writable(path: Path) -> bool:
    """Whether this user can write the SQLite file and, beside it, its -wal and -shm files."""
    if on_read_only_filesystem(path):
        return False
    return os.access(path.parent, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))


def read_only_location(location: StoreLocation) -> StoreLocation:
    """The same SQLite file opened read-only. On a read-only filesystem also `immutable`:
    SQLite then needs no -shm file beside it (which it could not create), and nothing can
    change the file under it there."""
    from urllib.parse import quote

    from sqlalchemy.engine import URL

    assert location.sqlite_path is not None
    query = {"mode": "ro", "uri": "true"}
    if on_read_only_filesystem(location.sqlite_path):
        query["immutable"] = "1"
    url = URL.create("sqlite", database=f"file:{quote(str(location.sqlite_path))}", query=query)
    return StoreLocation(
        url=url,
        display=location.display,
        sqlite_path=location.sqlite_path,
        read_only=True,
    )
