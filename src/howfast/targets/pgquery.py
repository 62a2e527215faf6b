"""The few SQL queries howfast makes: version, effective settings, pgbench tables, size."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from howfast.errors import HowfastError
from howfast.redact import redact_text
from howfast.targets.base import Connection

# psycopg is imported where a query is made: a dry run, which builds targets but connects to
# nothing, never loads it (a command's start-up time is its imports).
if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

# Settings recorded even at their default: they decide how a storage benchmark behaves.
KEY_SETTINGS = (
    "server_version",
    "shared_buffers",
    "effective_cache_size",
    "work_mem",
    "maintenance_work_mem",
    "max_connections",
    "max_wal_size",
    "min_wal_size",
    "checkpoint_timeout",
    "checkpoint_completion_target",
    "wal_level",
    "wal_buffers",
    "wal_sync_method",
    "wal_compression",
    "wal_segment_size",
    "synchronous_commit",
    "fsync",
    "full_page_writes",
    "data_checksums",
    "block_size",
    "effective_io_concurrency",
    "maintenance_io_concurrency",
    "random_page_cost",
    "huge_pages",
    "io_method",
    "bgwriter_delay",
    "bgwriter_lru_maxpages",
)
PGBENCH_TABLES = ("pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history")


def connect(
    conn: Connection, timeout_s: int = 10, *, application_name: str | None = None
) -> psycopg.Connection[tuple[object, ...]]:
    """A connection in autocommit; `timeout_s` unless the target's own connection text sets
    connect_timeout (`?connect_timeout=5`), which is the user's to choose. `application_name`:
    the session's from its start (pg_stat_activity shows it before any statement)."""
    import psycopg

    kwargs: dict[str, str | int] = {"connect_timeout": timeout_s, **conn.psycopg_kwargs()}
    if application_name is not None:
        kwargs["application_name"] = application_name
    try:
        return psycopg.connect(**kwargs, autocommit=True)  # type: ignore[arg-type]
    except psycopg.Error as exc:
        message = redact_text(str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc))
        raise HowfastError(
            f"cannot connect to {conn.host}:{conn.port} as {conn.user}: {message}"
        ) from None


def server_facts(conn: Connection) -> tuple[str, dict[str, str]]:
    """(server_version, settings): key settings plus every one not at its default."""
    with connect(conn) as db:
        version_row = db.execute("SHOW server_version").fetchone()
        rows = db.execute(
            "SELECT name, setting, unit, source FROM pg_settings "
            "WHERE source NOT IN ('default', 'override') OR name = ANY(%s) ORDER BY name",
            (list(KEY_SETTINGS),),
        ).fetchall()
    version = str(version_row[0]).split()[0] if version_row else "unknown"
    settings = {str(name): _with_unit(str(value), unit) for name, value, unit, _ in rows}
    return version, settings


def server_platform(conn: Connection) -> str | None:
    """The platform the server was built for (`platform_of` its version() text)."""
    with connect(conn) as db:
        row = db.execute("SELECT version()").fetchone()
    return platform_of(str(row[0])) if row else None


def platform_of(version: str) -> str | None:
    """'PostgreSQL 16.4 on x86_64-pc-linux-gnu, compiled by gcc ...' -> 'x86_64-pc-linux-gnu';
    Windows builds made with Visual C++ name no platform: 'windows'. Whether a
    wal_sync_method flushes the drive's cache depends on it (docs/why.md, durability)."""
    found = re.search(r" on (\S+?),", version)
    if found:
        return found.group(1)
    return "windows" if "Visual C++" in version else None


_MEMORY_UNITS = {"B": 1, "kB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}


def _with_unit(value: str, unit: object) -> str:
    """pg_settings says shared_buffers is '16384' in units of '8kB'; store '128MB' as a DBA
    would write it. Time units are appended as they are ('10' 'min' -> '10min')."""
    if not unit or not value.lstrip("-").isdigit():
        return value
    match = re.fullmatch(r"(\d*)(B|kB|MB|GB|TB)", str(unit))
    if not match:
        return f"{value}{unit}"
    size = int(value) * int(match.group(1) or 1) * _MEMORY_UNITS[match.group(2)]
    for name in ("TB", "GB", "MB", "kB"):
        if size and size % _MEMORY_UNITS[name] == 0:
            return f"{size // _MEMORY_UNITS[name]}{name}"
    return f"{size}B"


def existing_pgbench_tables(conn: Connection) -> list[str]:
    with connect(conn) as db:
        rows = db.execute(
            "SELECT c.relname FROM pg_class c WHERE c.relkind IN ('r', 'p') "
            "AND c.relname = ANY(%s) AND pg_table_is_visible(c.oid) ORDER BY 1",
            (list(PGBENCH_TABLES),),
        ).fetchall()
    return [str(r[0]) for r in rows]


def postmaster_start_time(conn: Connection) -> str:
    """pg_postmaster_start_time(), ISO 8601: a restarted server has a later one."""
    with connect(conn, timeout_s=5) as db:
        row = db.execute("SELECT pg_postmaster_start_time()::text").fetchone()
    assert row is not None
    return str(row[0])


def database_size(conn: Connection) -> int:
    with connect(conn) as db:
        row = db.execute("SELECT pg_database_size(current_database())").fetchone()
    return int(str(row[0])) if row else 0


def checkpoint(conn: Connection) -> float:
    """CHECKPOINT (superuser or pg_checkpoint); the seconds it took."""
    import psycopg

    with connect(conn) as db:
        started = time.monotonic()
        try:
            db.execute("CHECKPOINT")
        except psycopg.Error as exc:
            raise HowfastError(f"CHECKPOINT failed: {_first_line(exc)}") from None
        return time.monotonic() - started


def _setting_identifier(name: str) -> sql.Composable:
    """A setting name as SQL: `auto_explain.log_min_duration` is two identifiers."""
    from psycopg import sql

    return sql.SQL(".").join(sql.Identifier(part) for part in name.split("."))


def alter_system(conn: Connection, settings: dict[str, str], *, reset: set[str]) -> bool:
    """ALTER SYSTEM SET each setting (and RESET those in `reset` that are not set again), so
    that they override postgresql.conf. Returns whether one of them needs a restart.
    The server checks names and values; a refusal is a HowfastError naming the setting."""
    import psycopg

    try:
        return _alter_system(conn, settings, reset)
    except psycopg.Error as exc:  # the server went away meanwhile
        raise HowfastError(f"changing settings failed: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return redact_text(text.splitlines()[0]) if text else repr(exc)


def _alter_system(conn: Connection, settings: dict[str, str], reset: set[str]) -> bool:
    import psycopg
    from psycopg import sql

    with connect(conn) as db:
        names = sorted(set(settings) | reset)
        rows = db.execute(
            "SELECT name, context FROM pg_settings WHERE name = ANY(%s)", (names,)
        ).fetchall()
        contexts = {str(name): str(context) for name, context in rows}
        unknown = [n for n in settings if n not in contexts]
        if unknown:
            raise HowfastError(f"unknown PostgreSQL setting(s): {', '.join(unknown)}")
        for name in sorted(reset - set(settings)):
            db.execute(sql.SQL("ALTER SYSTEM RESET {}").format(_setting_identifier(name)))
        for name, value in settings.items():
            try:
                db.execute(
                    sql.SQL("ALTER SYSTEM SET {} = {}").format(
                        _setting_identifier(name), sql.Literal(value)
                    )
                )
            except psycopg.Error as exc:
                raise HowfastError(
                    f"setting {name} = {value!r} refused: {_first_line(exc)}"
                ) from None
    return any(contexts.get(n) == "postmaster" for n in names)


def alter_system_reset_all(conn: Connection) -> None:
    """Remove every ALTER SYSTEM setting (postgresql.auto.conf of a cluster howfast made)."""
    import psycopg

    try:
        with connect(conn) as db:
            db.execute("ALTER SYSTEM RESET ALL")
    except psycopg.Error as exc:
        raise HowfastError(f"resetting the settings failed: {_first_line(exc)}") from None


def apply_step_settings(
    conn: Connection,
    settings: dict[str, str],
    in_force: dict[str, str],
    restart: Callable[[], object],
) -> dict[str, str]:
    """Make `settings` the step's own over the plan's (ALTER SYSTEM; `in_force` are the ones
    set before), then reload, or `restart()` when one only takes effect at server start
    (shared_buffers...). Returns the settings now in force. When the server refuses one,
    everything goes back to the plan's (some may have been set before the refusal) and the
    error is raised."""
    try:
        needs_restart = alter_system(conn, settings, reset=set(in_force))
    except HowfastError:
        with contextlib.suppress(HowfastError):
            alter_system_reset_all(conn)
            reload_and_wait(conn)
        raise
    if needs_restart:
        restart()
    else:
        reload_and_wait(conn)
    return dict(settings)


def reload_and_wait(conn: Connection, timeout_s: float = 10.0) -> None:
    """pg_reload_conf() and wait until new sessions run with the reloaded files: the
    postmaster re-reads them asynchronously, and pg_conf_load_time() of a new session says
    when it has."""
    import psycopg

    try:
        with connect(conn) as db:
            before = db.execute("SELECT pg_conf_load_time()").fetchone()
            db.execute("SELECT pg_reload_conf()")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with connect(conn) as db:
                now = db.execute("SELECT pg_conf_load_time()").fetchone()
            if now != before:
                return
            time.sleep(0.05)
    except psycopg.Error as exc:
        raise HowfastError(f"reloading the settings failed: {_first_line(exc)}") from None
    raise HowfastError(f"the server did not reload its settings within {timeout_s:.0f} s")
