"""Versioned schema: an ordered list of migrations; the database records how many it has had.

Migration N (1-based) takes a database from version N-1 to N. Opening a store applies the
missing ones in one transaction (PostgreSQL and, with engine.py's BEGIN handling, SQLite both
roll DDL back), so a failed migration leaves the database as it was.

To change the schema: append a function to MIGRATIONS that alters the tables, and update
schema.py to the result. Never edit a migration that has been released; databases out there
have already run it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Double,
    Engine,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection

from howfast.errors import HowfastError
from howfast.store.engine import write_transaction
from howfast.store.schema import HOWFAST_TABLES, schema_version

Migration = Callable[[Connection], None]

# Serialises concurrent first opens of the same PostgreSQL database (an arbitrary constant:
# "howfas" in ASCII). SQLite serialises them with BEGIN IMMEDIATE.
_PG_MIGRATION_LOCK = 0x686F77666173


def _v1_create_tables(connection: Connection) -> None:
    """The first schema. Frozen: these definitions must not follow later changes."""
    md = MetaData()
    Table(
        "runs",
        md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("plan", Text, nullable=False),
        Column("label", Text),
        Column("status", Text, nullable=False),
        Column("started_at", Text, nullable=False),
        Column("finished_at", Text),
        Column("environment", JSON, nullable=False),
    )
    Table(
        "targets",
        md,
        Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        Column("position", Integer, primary_key=True),
        Column("name", Text, nullable=False),
        Column("kind", Text, nullable=False),
        Column("location", Text),
        Column("pg_version", Text),
        Column("settings", JSON, nullable=False),
        Column("device", JSON, nullable=False),
        UniqueConstraint("run_id", "name", name="uq_targets_run_name"),
    )
    Table(
        "steps",
        md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        Column("position", Integer, nullable=False),
        Column("target", Text, nullable=False),
        Column("workload", Text, nullable=False),
        Column("params", JSON, nullable=False),
        Column("status", Text, nullable=False),
        Column("error", Text),
        Column("started_at", Text, nullable=False),
        Column("finished_at", Text, nullable=False),
        Column("metrics", JSON, nullable=False),
        Column("warnings", JSON, nullable=False),
        Index("ix_steps_run_id", "run_id"),
    )
    Table(
        "samples",
        md,
        Column("step_id", Integer, ForeignKey("steps.id", ondelete="CASCADE"), nullable=False),
        Column("series", Text, nullable=False),
        Column("t", Double, nullable=False),
        Column("value", Double),
        Index("ix_samples_step_id", "step_id"),
    )
    Table(
        "histograms",
        md,
        Column("step_id", Integer, ForeignKey("steps.id", ondelete="CASCADE"), nullable=False),
        Column("name", Text, nullable=False),
        Column("value", BigInteger, nullable=False),
        Column("count", BigInteger, nullable=False),
        Index("ix_histograms_step_id", "step_id"),
    )
    md.create_all(connection)


def _v2_step_sections(connection: Connection) -> None:
    """What the samplers saw during a step: a JSON object of sections (io, cpu, postgres).
    Nullable: steps stored before sampling existed have none."""
    column_type = JSON().compile(dialect=connection.dialect)
    connection.execute(text(f"ALTER TABLE steps ADD COLUMN sections {column_type}"))


def _v3_run_writer(connection: Connection) -> None:
    """Which process writes a run (host, boot, PID, start time), so that a later howfast can
    tell a run whose process was killed from one still going. NULL for older runs."""
    column_type = JSON().compile(dialect=connection.dialect)
    connection.execute(text(f"ALTER TABLE runs ADD COLUMN writer {column_type}"))


def _v4_step_resolved(connection: Connection) -> None:
    """The params resolved at run time (jobs, the rate a fraction came to, direct I/O...),
    apart from the params the plan asked. NULL for older steps: their params hold both, and
    their metrics, warnings and sections may hold verdicts frozen at run time, which are
    derived again when read (analysis/derive.py)."""
    column_type = JSON().compile(dialect=connection.dialect)
    connection.execute(text(f"ALTER TABLE steps ADD COLUMN resolved {column_type}"))


def _v5_target_standbys(connection: Connection) -> None:
    """The standbys howfast gave a target (issue 28): a JSON list. NULL for older targets,
    which had none."""
    column_type = JSON().compile(dialect=connection.dialect)
    connection.execute(text(f"ALTER TABLE targets ADD COLUMN standbys {column_type}"))


def _v6_target_client(connection: Connection) -> None:
    """Where a target's client (pgbench) ran and how it reached the server (--client,
    issue 28): a JSON object. NULL for older targets."""
    column_type = JSON().compile(dialect=connection.dialect)
    connection.execute(text(f"ALTER TABLE targets ADD COLUMN client {column_type}"))


MIGRATIONS: tuple[Migration, ...] = (
    _v1_create_tables,
    _v2_step_sections,
    _v3_run_writer,
    _v4_step_resolved,
    _v5_target_standbys,
    _v6_target_client,
)
SCHEMA_VERSION = len(MIGRATIONS)


def read_version(connection: Connection, where: str = "") -> int | None:
    """The database's schema version; None when howfast has never initialised it."""
    if not inspect(connection).has_table(schema_version.name):
        return None
    rows = connection.execute(select(schema_version.c.version)).scalars().all()
    if len(rows) != 1 or rows[0] is None:
        # Migrating from a guessed version would fail half-way ("duplicate column") or worse.
        found = "no version row" if not rows else f"{len(rows)} version rows"
        raise HowfastError(
            f"{_named('the results store', where)}: its schema_version table has {found} (one "
            "is expected): the store was damaged or edited by hand, and howfast will not "
            "touch it",
            hint="restore it from a backup, or put back the one row of the howfast version "
            "that wrote it (this howfast writes version "
            f"{len(MIGRATIONS)}: DELETE FROM schema_version; INSERT INTO schema_version "
            f"VALUES ({len(MIGRATIONS)})), or give another --store",
        )
    return int(rows[0])


def migrate(
    engine: Engine,
    migrations: Sequence[Migration] = MIGRATIONS,
    *,
    where: str = "",
    read_only: bool = False,
) -> int:
    """Bring the database to the newest version `migrations` describe; return that version.

    Refuses a database from a newer howfast, and one that has tables named like ours that
    howfast did not create. `where` names the store in those errors. A `read_only` database
    is only read: it must be at the newest version already."""
    newest = len(migrations)
    # A plain read first: the usual case is an up-to-date database, and a reader should not
    # queue behind a writer for the write lock just to find that out.
    with engine.connect() as connection:
        current = read_version(connection, where)
    if current is not None:
        _refuse_newer(current, newest, where)
        if current == newest:
            return newest
    if read_only:
        state = "is not a howfast store" if current is None else f"has schema version {current}"
        raise HowfastError(
            f"{_named('the results store', where)} cannot be written (a read-only filesystem "
            f"or file) and {state}, older than this howfast reads ({newest}): it would have "
            "to be upgraded first",
            hint="copy it somewhere writable and give that copy with --store",
        )
    with write_transaction(engine) as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK}
            )
        # Again: another process may have migrated meanwhile.
        current = read_version(connection, where)
        if current is None:
            _refuse_foreign_tables(connection, where)
            schema_version.create(connection)
            connection.execute(schema_version.insert().values(version=0))
            current = 0
        _refuse_newer(current, newest, where)
        for migration in migrations[current:]:
            migration(connection)
        connection.execute(update(schema_version).values(version=newest))
    return newest


def _refuse_newer(current: int, newest: int, where: str) -> None:
    if current > newest:
        raise HowfastError(
            f"{_named('the results store', where)} has schema version {current}, "
            f"newer than this howfast understands ({newest})",
            hint="upgrade howfast, or use another store with --store",
        )


def _refuse_foreign_tables(connection: Connection, where: str) -> None:
    existing = set(inspect(connection).get_table_names())
    clash = sorted(existing.intersection(HOWFAST_TABLES))
    if clash:
        raise HowfastError(
            f"{_named('the database', where)} already has tables howfast did not create: "
            f"{', '.join(clash)}",
            hint="use a database of its own for howfast results",
        )


def _named(what: str, where: str) -> str:
    return f"{what} {where}" if where else what
