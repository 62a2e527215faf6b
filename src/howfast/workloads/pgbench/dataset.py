"""Sizing pgbench's data for a working-set regime, on the target itself.

A scale-1 load first measures what one scale unit takes on this server: the database's size
minus what it holds besides the pgbench tables. A unit's size depends on the PostgreSQL
version, fillfactor and partitioning, so it is measured rather than guessed. `sizing.py`
then picks the scale from the memory PostgreSQL can use and its shared_buffers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from howfast.errors import HowfastError
from howfast.model import JSONValue
from howfast.sizing import DatasetPlan, parse_dataset, plan_dataset
from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.memory import MemoryBasis, human_bytes
from howfast.workloads.base import StepContext, StepOutcome
from howfast.workloads.pgbench import build

SIZE_TOLERANCE = 0.10  # a loaded database this far from the expected size is worth a warning
SPACE_MARGIN = 1.2  # room for WAL and the index builds' temporary files besides the data
OVERSHOOT = 1.25  # scale 1 is the least pgbench loads: say so when it is well over the target

_SIZES_SQL = """
SELECT pg_database_size(current_database()),
       (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
         WHERE c.relkind = 'r' AND c.relname ~ '^pgbench_' AND pg_table_is_visible(c.oid)),
       pg_size_bytes(current_setting('shared_buffers'))
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


def measure(conn: Connection) -> tuple[int, int, int]:
    """(database bytes, bytes of the pgbench tables with their indexes, shared_buffers)."""
    with pgquery.connect(conn) as db:
        row = db.execute(_SIZES_SQL).fetchone()
    if row is None:
        raise HowfastError("the server returned no sizes")
    total, tables, shared = (int(str(v)) for v in row)
    return total, tables, shared


def size_for(ctx: StepContext, params: dict[str, JSONValue], pgbench: str) -> Sizing:
    """Load scale 1, measure, and choose the scale for the step's dataset."""
    dataset = str(params["dataset"])
    regime, explicit = parse_dataset(dataset)
    group = ctx.target.memory_cgroup()
    basis = ctx.host.server_memory(group.limit_bytes if group else None)
    if isinstance(basis, str):
        if regime != "size":  # a regime is a share of the memory: nothing to take it of
            raise HowfastError(f"--dataset {dataset}: {basis}")
        basis = MemoryBasis(0, "unknown")  # an explicit size needs no memory figure
    warnings: list[str] = []
    started = time.monotonic()
    server = ctx.server()
    result = ctx.run(build.init_invocation(pgbench, {**params, "scale": 1}, server))
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-5:])
        raise HowfastError(f"measuring one scale unit (pgbench -i -s 1) failed:\n{tail}")
    total, unit, shared = measure(server)
    try:
        plan = plan_dataset(
            regime,
            explicit_bytes=explicit,
            memory_bytes=basis.bytes,
            shared_buffers_bytes=shared,
            bytes_per_scale=unit,
            base_bytes=total - unit,
        )
        check_room(ctx, plan, already_loaded=unit)
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


def check_room(ctx: StepContext, plan: DatasetPlan, *, already_loaded: int) -> None:
    """Refuse a load that cannot fit on the storage, before spending hours on it."""
    data = ctx.target.storage_paths().get("data")
    if data is None:
        return  # an existing server: its disks are not visible
    free_now = ctx.host.free_bytes(data)
    if free_now is None:
        return  # the filesystem does not say
    free = free_now + already_loaded  # the load drops what is there
    need = int(plan.expected_bytes * SPACE_MARGIN)
    if need > free:
        raise HowfastError(
            f"the {plan.regime} dataset (scale {plan.scale}, about "
            f"{human_bytes(plan.expected_bytes)}) needs about {human_bytes(need)} but "
            f"{data} has {human_bytes(free)} free",
            "emulate a machine with less memory with --memory, or give --dataset SIZE",
        )


def finish(outcome: StepOutcome, sizing: Sizing | None) -> StepOutcome:
    """Record how the data was sized: the chosen scale (a param, which the steps that follow
    record too), the sizes expected and loaded, the memory it was sized for."""
    if sizing is None:
        return outcome
    outcome.resolved_params.update(sizing.params())
    outcome.metrics.update(sizing.metrics())
    outcome.warnings += sizing.warnings
    actual = outcome.metrics.get("db_size_bytes")
    expected = sizing.plan.expected_bytes
    if isinstance(actual, int) and abs(actual - expected) > SIZE_TOLERANCE * expected:
        outcome.warnings.append(
            f"the database is {human_bytes(actual)}, {actual / expected - 1:+.0%} off the "
            f"{human_bytes(expected)} expected from the measured size of one scale unit"
        )
    return outcome


# What one scale unit takes with its indexes, on the generous side (PostgreSQL 13-17 at the
# default fillfactor: about 15 MiB): below half the free space with it, no need to measure.
GENEROUS_BYTES_PER_SCALE = 16 * 2**20


def check_scale_room(ctx: StepContext, params: dict[str, JSONValue], pgbench: str) -> None:
    """Refuse an explicit --scale that cannot fit on the target's filesystem, before loading
    it: a full disk makes PostgreSQL PANIC. When a generous estimate leaves any doubt, load
    scale 1 and measure what a unit takes on this server, as --dataset does."""
    scale = params.get("scale")
    data = ctx.target.storage_paths().get("data")
    if not isinstance(scale, int) or data is None:
        return  # an existing server: its disks are not visible
    free_now = ctx.host.free_bytes(data)
    if free_now is None or GENEROUS_BYTES_PER_SCALE * scale * SPACE_MARGIN < free_now / 2:
        return
    server = ctx.server()
    result = ctx.run(build.init_invocation(pgbench, {**params, "scale": 1}, server))
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-5:])
        raise HowfastError(f"measuring one scale unit (pgbench -i -s 1) failed:\n{tail}")
    _, unit, _ = measure(server)
    free = (ctx.host.free_bytes(data) or free_now) + unit  # the load drops what is there
    need = int(scale * unit * SPACE_MARGIN)
    if need > free:
        drop_tables(server)  # later steps must not quietly measure the scale-1 tables
        raise HowfastError(
            f"scale {scale} needs about {human_bytes(need)} ({human_bytes(unit)} per scale "
            f"unit, measured, plus {SPACE_MARGIN - 1:.0%} for WAL and index builds) but "
            f"{data} has {human_bytes(free)} free: not loaded",
            "lower --scale, or free space on the target",
        )
