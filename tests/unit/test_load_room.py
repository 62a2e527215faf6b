"""The room a pgbench load needs (workloads/pgbench/room.py) and which steps a failed load
leaves without their tables (runner/step.py), on figures measured on PostgreSQL 15; the real
loads on small filesystems are tests/integration/test_load_room.py."""

from __future__ import annotations

from howfast.model import StepRecord, StepSpec
from howfast.runner.step import error_gist, unloaded_reason
from howfast.workloads.pgbench.room import (
    GENEROUS_UNIT,
    MIB,
    Room,
    UnitCost,
    WalBounds,
    generous_unit,
    load_need,
    needs_measuring,
    shortfall,
)

GIB = 1024 * MIB
# PostgreSQL 15, scale 1, measured: tables, primary keys, WAL written by the load
PG15_UNIT = UnitCost(13_549_568, 2_293_760, 13_140_080)


def test_wal_grows_with_the_load_until_checkpoints_recycle_it_near_max_wal_size() -> None:
    bounds = WalBounds(GIB, in_pg_wal=32 * MIB)
    assert bounds.growth(75 * MIB) == 75 * MIB
    assert bounds.growth(4 * GIB) == GIB - 32 * MIB  # bounded: pg_wal reaches max_wal_size
    assert WalBounds(GIB, wal_keep_size=GIB).growth(4 * GIB) == 2 * GIB
    assert WalBounds(GIB, archiving=True).growth(4 * GIB) == 4 * GIB  # kept until archived
    assert WalBounds(None).growth(4 * GIB) == 4 * GIB  # not known: counted in full


def test_the_issues_scale_6_on_182_mb_does_not_fit_and_scale_3_does() -> None:
    """Scale 6 failed in its load on a 182 MB volume with 128 MiB free after initdb: 91 MiB of
    tables and keys (all the old estimate counted, with 20%), 75 MiB of WAL, 13 MiB of sort
    files."""
    bounds = WalBounds(GIB, in_pg_wal=16 * MIB)
    free = Room(128 * MIB)
    six = load_need(6, PG15_UNIT, bounds)
    assert 6 * PG15_UNIT.data_bytes * 1.2 < free.data_free  # what passed before
    assert shortfall(six, free) == (six.data_bytes + six.wal_bytes, 128 * MIB, "data")
    assert 190 * MIB < six.data_bytes + six.wal_bytes < 200 * MIB
    assert shortfall(load_need(3, PG15_UNIT, bounds), free) is None


def test_the_load_drops_the_tables_already_there_and_the_wal_may_have_its_own_filesystem() -> None:
    need = load_need(6, PG15_UNIT, WalBounds(GIB))
    assert shortfall(need, Room(120 * MIB, reclaimed=80 * MIB)) is None
    apart = Room(10 * GIB, wal_free=64 * MIB)
    assert shortfall(need, apart) == (need.wal_bytes, 64 * MIB, "wal")
    assert "on the WAL's filesystem" in need.parts(wal_apart=True)
    assert shortfall(need, Room(10 * GIB, wal_free=GIB)) is None


def test_the_generous_estimate_is_above_what_postgresql_15_measured() -> None:
    bounds = WalBounds(GIB)
    measured, generous = load_need(10, PG15_UNIT, bounds), load_need(10, GENEROUS_UNIT, bounds)
    assert generous.data_bytes > measured.data_bytes and generous.wal_bytes > measured.wal_bytes
    assert not needs_measuring(generous, Room(10 * GIB))
    assert needs_measuring(generous, Room(500 * MIB))  # over half: measure before deciding


def step(workload: str, status: str, step_id: int, error: str | None = None) -> StepRecord:
    scale = {"scale": 6} if workload == "pgbench-init" else {"mode": "select-only", "clients": 1}
    return StepRecord(target="t", workload=workload, params=scale, status=status,  # type: ignore[arg-type]
                      started_at="", finished_at="", error=error, id=step_id)  # fmt: skip


ENOSPC = (
    "pgbench exited with status 1:\n"
    "creating primary keys...\n"
    'pgbench: error: query failed: ERROR:  could not write to file "base/pgsql_tmp/x": No '
    "space left on device\n"
    "pgbench: detail: Query was: alter table pgbench_accounts add primary key (aid)\n"
    "--- server log (last lines) ---\n"
    "ERROR:  could not write to file"
)


def test_a_step_reading_the_tables_of_a_failed_load_names_it() -> None:
    pgbench = StepSpec("pgbench", {"mode": "select-only", "clients": 1})
    failed = [step("fio", "completed", 1), step("pgbench-init", "failed", 2, ENOSPC)]
    reason = unloaded_reason(pgbench, failed, {1: 1, 2: 2})
    assert reason == (
        "step 2 (pgbench -i scale 6) failed, so the tables this step reads are missing or "
        'incomplete: pgbench: error: query failed: ERROR:  could not write to file "base/'
        'pgsql_tmp/x": No space left on device'
    )
    assert unloaded_reason(StepSpec("seqread", {}), failed, {}) is not None
    # Neither a load nor a fio probe reads the tables; a later load that worked is read.
    assert unloaded_reason(StepSpec("pgbench-init", {"scale": 1}), failed, {}) is None
    assert unloaded_reason(StepSpec("fio", {}), failed, {}) is None
    reloaded = [*failed, step("pgbench", "skipped", 3), step("pgbench-init", "completed", 4)]
    assert unloaded_reason(pgbench, reloaded, {}) is None
    assert unloaded_reason(pgbench, [], {}) is None  # no load in the plan: the tables exist


def test_the_gist_of_an_error_is_one_telling_line_of_bounded_length() -> None:
    assert error_gist(None) == "no reason was recorded"
    assert error_gist("scale 40 needs about 700 MiB but /x has 100 MiB free") == (
        "scale 40 needs about 700 MiB but /x has 100 MiB free"
    )
    long = error_gist("x" * 50 + " " + "y" * 200)
    assert long == "x" * 50 + "…"


def test_a_lower_fillfactor_is_estimated_larger_before_measuring() -> None:
    assert generous_unit() == GENEROUS_UNIT
    tenth = generous_unit(10)
    assert tenth.table_bytes == 10 * GENEROUS_UNIT.table_bytes
    assert tenth.index_bytes == GENEROUS_UNIT.index_bytes  # the keys do not spread
    assert generous_unit("bogus") == GENEROUS_UNIT
