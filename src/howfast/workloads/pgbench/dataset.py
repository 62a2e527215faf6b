"""Sizing pgbench's data for a working-set regime, on the target itself.

A scale-1 load first measures what one scale unit takes on this server: the database's size
minus what it holds besides the pgbench tables. A unit's size depends on the PostgreSQL
version, fillfactor and partitioning, so it is measured rather than guessed. `sizing.py`
then picks the scale from the memory PostgreSQL can use and its shared_buffers.

Before any load, the room it needs at its peak (tables, primary keys, the keys' sort files,
WAL up to max_wal_size: room.py) is checked against the target's filesystems, so that a full
disk is a refusal instead of a PANIC or a half-loaded database.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from howfast.errors import HowfastError
from howfast.machine.memory import MemoryBasis
from howfast.model import JSONValue
from howfast.sizing import DatasetPlan, parse_dataset, plan_dataset
from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.capabilities import HasLocalServer, HasStorage
from howfast.units import human_bytes
from howfast.workloads.base import StepContext, StepOutcome
from howfast.workloads.pgbench import build, room

SIZE_TOLERANCE = 0.10  # a loaded database this far from the expected size is worth a warning
OVERSHOOT = 1.25  # scale 1 is the least pgbench loads: say so when it is well over the target

_SIZES_SQL = """
SELECT pg_database_size(current_database()),
       (SELECT coalesce(sum(pg_table_size(c.oid)), 0) FROM pg_class c
         WHERE c.relkind = 'r' AND c.relname ~ '^pgbench_' AND pg_table_is_visible(c.oid)),
       (SELECT coalesce(sum(pg_indexes_size(c.oid)), 0) FROM pg_class c
         WHERE c.relkind = 'r' AND c.relname ~ '^pgbench_' AND pg_table_is_visible(c.oid)),
       pg_size_bytes(current_setting('shared_buffers'))
"""
# What bounds pg_wal (room.py); wal_keep_segments before PostgreSQL 13, wal_keep_size since.
_WAL_SQL = """
SELECT pg_size_bytes(current_setting('max_wal_size')),
       coalesce(pg_size_bytes(current_setting('wal_keep_size', true)),
                current_setting('wal_keep_segments', true)::bigint
                * pg_size_bytes(current_setting('wal_segment_size')), 0),
       current_setting('archive_mode')
"""


@dataclass
class Sizing:
    dataset: str
    plan: DatasetPlan
    basis: MemoryBasis
    probe_s: float
    warnings: list[str] = field(default_factory=list)

    def params(self) -> dict[str, JSONValue]:
        return {
            "scale": self.plan.scale,
            "regime": self.plan.regime,
            "memory_bytes": self.basis.bytes if self.basis.source != "unknown" else None,
            "memory_basis": self.basis.source,
        }

    def metrics(self) -> dict[str, JSONValue]:
        return {
            "dataset_target_bytes": self.plan.target_bytes,
            "dataset_expected_bytes": self.plan.expected_bytes,
            "bytes_per_scale": self.plan.bytes_per_scale,
            "dataset_base_bytes": self.plan.expected_bytes
            - self.plan.scale * self.plan.bytes_per_scale,
            "shared_buffers_bytes": self.plan.shared_buffers_bytes,
            "sizing_ms": round(self.probe_s * 1000, 1),
        }


def wanted(params: dict[str, JSONValue]) -> bool:
    """Whether the step asks for a dataset whose scale is still to be computed."""
    return params.get("dataset") is not None and params.get("scale") is None


def measure(conn: Connection) -> tuple[int, int, int, int]:
    """(database bytes, bytes of the pgbench tables, of their indexes, shared_buffers)."""
    import psycopg  # here, not at the top: a dry run never loads it

    try:
        with pgquery.connect(conn) as db:
            row = db.execute(_SIZES_SQL).fetchone()
    except psycopg.Error as exc:
        raise HowfastError(f"reading the database's size failed: {exc}") from None
    if row is None:
        raise HowfastError("the server returned no sizes")
    total, tables, indexes, shared = (int(str(v)) for v in row)
    return total, tables, indexes, shared


def wal_bounds(conn: Connection) -> room.WalBounds:
    """What bounds pg_wal's growth on the server, and what it holds now (pg_ls_waldir needs a
    superuser or pg_monitor: without it, pg_wal is taken as empty, on the safe side)."""
    import psycopg

    try:
        with pgquery.connect(conn) as db:
            row = db.execute(_WAL_SQL).fetchone()
            try:
                held = db.execute("SELECT coalesce(sum(size), 0) FROM pg_ls_waldir()").fetchone()
            except psycopg.Error:
                held = None
    except psycopg.Error:
        return room.WalBounds(None)  # WAL then counted in full
    if row is None:
        return room.WalBounds(None)
    max_wal, keep, archive = row
    return room.WalBounds(
        int(str(max_wal)),
        int(str(keep)),
        archiving=str(archive) != "off",
        in_pg_wal=int(str(held[0])) if held else 0,
    )


def wal_position(conn: Connection) -> int | None:
    """Bytes of WAL written since the cluster began (pg_current_wal_lsn, PostgreSQL 10+)."""
    import psycopg

    try:
        with pgquery.connect(conn) as db:
            row = db.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')").fetchone()
    except psycopg.Error:
        return None  # an older server, or a standby: the generous figure stands in
    return int(str(row[0])) if row else None


@dataclass(frozen=True)
class Measured:
    """What the scale-1 load measured on the target."""

    unit: room.UnitCost
    database_bytes: int
    shared_buffers_bytes: int


def measure_unit(ctx: StepContext, params: dict[str, JSONValue], pgbench: str) -> Measured:
    """Load scale 1 and measure what one scale unit takes: its tables, their primary keys,
    and the WAL loading them wrote. Refused first when even that cannot fit."""
    generous = room.generous_unit(params.get("fillfactor"))
    refuse_unless_fits(ctx, 1, generous, "the measuring load (pgbench -i -s 1)")
    server = ctx.sql_connection()  # this process's SQL; pgbench dials the load's connection
    before = wal_position(server)
    result = ctx.run(build.init_invocation(pgbench, {**params, "scale": 1}, ctx.server()))
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-5:])
        raise HowfastError(f"measuring one scale unit (pgbench -i -s 1) failed:\n{tail}")
    after = wal_position(server)
    total, tables, indexes, shared = measure(server)
    wal = after - before if after is not None and before is not None else None
    unit = room.UnitCost(tables, indexes, wal if wal else generous.wal_bytes)
    return Measured(unit, total, shared)


def size_for(ctx: StepContext, params: dict[str, JSONValue], pgbench: str) -> Sizing:
    """Load scale 1, measure, and choose the scale for the step's dataset."""
    dataset = str(params["dataset"])
    regime, explicit = parse_dataset(dataset)
    group = ctx.target.memory_cgroup() if isinstance(ctx.target, HasLocalServer) else None
    basis = ctx.server_machine().server_memory(group.limit_bytes if group else None)
    if isinstance(basis, str):
        if regime != "size":  # a regime is a share of the memory: nothing to take it of
            raise HowfastError(f"--dataset {dataset}: {basis}")
        basis = MemoryBasis(0, "unknown")  # an explicit size needs no memory figure
    warnings: list[str] = []
    started = time.monotonic()
    server = ctx.sql_connection()
    measured = measure_unit(ctx, params, pgbench)
    unit = measured.unit.data_bytes
    try:
        plan = plan_dataset(
            regime,
            explicit_bytes=explicit,
            memory_bytes=basis.bytes,
            shared_buffers_bytes=measured.shared_buffers_bytes,
            bytes_per_scale=unit,
            base_bytes=measured.database_bytes - unit,
        )
        check_room(ctx, plan, measured.unit)
    except HowfastError:
        # Later steps must not quietly measure the scale-1 tables instead.
        drop_tables(server)
        raise
    if plan.expected_bytes > OVERSHOOT * plan.target_bytes:
        warnings.append(
            f"scale 1, the smallest pgbench database ({human_bytes(plan.expected_bytes)}), "
            f"is larger than the {human_bytes(plan.target_bytes)} {regime} asks for: "
            + ("raise shared_buffers" if regime == "in-buffers" else "raise the memory")
        )
    return Sizing(dataset, plan, basis, time.monotonic() - started, warnings)


def drop_tables(conn: Connection) -> None:
    with pgquery.connect(conn) as db:
        db.execute(f"DROP TABLE IF EXISTS {', '.join(pgquery.PGBENCH_TABLES)}")


def check_room(ctx: StepContext, plan: DatasetPlan, unit: room.UnitCost) -> None:
    """Refuse a load that cannot fit on the storage, before spending hours on it."""
    problem = room_problem(ctx, plan.scale, unit)
    if problem is not None:
        raise HowfastError(
            f"the {plan.regime} dataset (scale {plan.scale}, about "
            f"{human_bytes(plan.expected_bytes)}) {problem}",
            "emulate a machine with less memory with --memory, or give --dataset SIZE",
        )


def free_room(ctx: StepContext) -> tuple[room.Room, dict[str, Path]] | None:
    """Free bytes on the data directory's filesystem, and on the WAL's when it is another;
    None where the disks are not visible (an existing server) or do not say."""
    paths = ctx.target.storage_paths() if isinstance(ctx.target, HasStorage) else {}
    data = paths.get("data")
    if data is None:
        return None
    machine = ctx.server_machine()  # the volumes are the server's, not a client pod's
    data_free = machine.free_bytes(data)
    if data_free is None:
        return None
    wal = paths.get("wal", data)
    wal_free = None
    if not machine.same_filesystem(data, wal):
        wal_free = machine.free_bytes(wal)
    _, tables, indexes, _ = measure(ctx.sql_connection())  # what the load drops before it loads
    return room.Room(data_free, wal_free, reclaimed=tables + indexes), paths


def room_problem(ctx: StepContext, scale: int, unit: room.UnitCost) -> str | None:
    """ "needs about ... but ... has ... free", when a load of `scale` does not fit."""
    found = free_room(ctx)
    if found is None:
        return None
    free, paths = found
    need = room.load_need(scale, unit, wal_bounds(ctx.sql_connection()))
    short = room.shortfall(need, free)
    if short is None:
        return None
    needed, available, role = short
    where = paths["wal"] if role == "wal" else paths["data"]
    what = " for its WAL" if role == "wal" else ""
    return (
        f"needs about {human_bytes(needed)}{what} ({need.parts(wal_apart=free.wal_apart)}) "
        f"but {where} has {human_bytes(available)} free"
    )


def refuse_unless_fits(ctx: StepContext, scale: int, unit: room.UnitCost, what: str) -> None:
    problem = room_problem(ctx, scale, unit)
    if problem is not None:
        raise HowfastError(
            f"{what} {problem}: not loaded",
            "lower --scale, free space on the target, or give it a larger filesystem",
        )


def finish(outcome: StepOutcome, sizing: Sizing | None) -> StepOutcome:
    """Record how the data was sized: the chosen scale (a param, which the steps that follow
    record too), the sizes expected and loaded, the memory it was sized for."""
    if sizing is None:
        return outcome
    metrics = {**outcome.metrics, **sizing.metrics()}
    warnings = [*outcome.warnings, *sizing.warnings]
    actual = metrics.get("db_size_bytes")
    expected = sizing.plan.expected_bytes
    if isinstance(actual, int) and abs(actual - expected) > SIZE_TOLERANCE * expected:
        warnings.append(
            f"the database is {human_bytes(actual)}, {actual / expected - 1:+.0%} off the "
            f"{human_bytes(expected)} expected from the measured size of one scale unit"
        )
    resolved = {**outcome.resolved_params, **sizing.params()}
    return replace(outcome, resolved_params=resolved, metrics=metrics, warnings=tuple(warnings))


def check_scale_room(ctx: StepContext, params: dict[str, JSONValue], pgbench: str) -> None:
    """Refuse an explicit --scale that cannot fit on the target's filesystems, before loading
    it: a full disk makes PostgreSQL PANIC, or leaves tables without their keys. When a
    generous estimate leaves any doubt, load scale 1 and measure what a unit takes on this
    server, as --dataset does."""
    scale = params.get("scale")
    if not isinstance(scale, int):
        return
    found = free_room(ctx)
    if found is None:
        return  # an existing server: its disks are not visible
    free, _ = found
    bounds = wal_bounds(ctx.sql_connection())
    unit = room.generous_unit(params.get("fillfactor"))
    if not room.needs_measuring(room.load_need(scale, unit, bounds), free):
        return
    what = f"scale {scale}"
    if scale == 1 or room.shortfall(room.load_need(1, unit, bounds), free):
        # Scale 1 is its own measure; and where not even that fits, the generous estimate
        # of the whole load says how far off it is.
        refuse_unless_fits(ctx, scale, unit, what)
        return
    measured = measure_unit(ctx, params, pgbench)
    problem = room_problem(ctx, scale, measured.unit)
    if problem is not None:
        drop_tables(ctx.sql_connection())  # later steps must not quietly measure the scale-1 tables
        raise HowfastError(
            f"{what} {problem}: not loaded",
            "lower --scale, free space on the target, or give it a larger filesystem",
        )
