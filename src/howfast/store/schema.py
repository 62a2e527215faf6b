"""The tables as the newest migration leaves them; the queries in sql.py are written against these.

The DDL that creates and alters tables lives in migrations.py, frozen per version. When a
migration changes a table, change it here too; a unit test checks that the two agree.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("plan", Text, nullable=False),
    Column("label", Text),
    Column("status", Text, nullable=False),
    Column("started_at", Text, nullable=False),
    Column("finished_at", Text),
    Column("environment", JSON, nullable=False),
    # v3: the process writing the run while it is `running` (see store/liveness.py)
    Column("writer", JSON),
)

targets = Table(
    "targets",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("name", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("location", Text),
    Column("pg_version", Text),
    Column("settings", JSON, nullable=False),
    Column("device", JSON, nullable=False),
    Column("standbys", JSON),  # v5: NULL for targets stored before, which had none
    Column("client", JSON),  # v6: where pgbench ran (--client); NULL before
    UniqueConstraint("run_id", "name", name="uq_targets_run_name"),
)

steps = Table(
    "steps",
    metadata,
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
    # v2: the samplers' sections (io, cpu, postgres); NULL for older steps
    Column("sections", JSON),
    # v4: params resolved at run time, apart from `params` (as asked); NULL for older steps
    Column("resolved", JSON),
)

samples = Table(
    "samples",
    metadata,
    Column("step_id", Integer, ForeignKey("steps.id", ondelete="CASCADE"), nullable=False),
    Column("series", Text, nullable=False),
    Column("t", Double, nullable=False),
    # NULL stands for NaN: SQLite cannot store NaN in a REAL column.
    Column("value", Double),
    Index("ix_samples_step_id", "step_id"),
)

histograms = Table(
    "histograms",
    metadata,
    Column("step_id", Integer, ForeignKey("steps.id", ondelete="CASCADE"), nullable=False),
    Column("name", Text, nullable=False),
    Column("value", BigInteger, nullable=False),
    Column("count", BigInteger, nullable=False),
    Index("ix_histograms_step_id", "step_id"),
)

# Made by migrate() itself, before any migration runs; its shape must never change.
schema_version = Table(
    "schema_version",
    metadata,
    Column("version", Integer, nullable=False),
)

# Tables howfast creates; finding one of these without `schema_version` means the database
# holds somebody else's tables and we refuse to touch it.
HOWFAST_TABLES = ("runs", "targets", "steps", "samples", "histograms")
