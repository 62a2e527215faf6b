"""The statistics views sampler: which views per version, its query, and deltas on recorded
rows of PostgreSQL 15 and rows of 16 and 17 built from their documented columns."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from howfast.analysis.io import cache_hit_ratio, checkpoints_from_views
from howfast.samplers.pgstats import (
    Snapshot,
    build_query,
    choose_views,
    parse_snapshot,
    place,
    snapshot_delta,
    snapshot_series,
    summed_delta,
)

DATA = Path(__file__).parent.parent / "data" / "pgstats"


def snapshots(version: str, seconds: float = 1.0) -> tuple[Snapshot, Snapshot]:
    first = json.loads((DATA / f"{version}-1.json").read_text())
    last = json.loads((DATA / f"{version}-2.json").read_text())
    return parse_snapshot(0.0, first), parse_snapshot(seconds, last)


WAL, BGWRITER, CHECKPOINTER, IO, DATABASE = (
    "pg_stat_wal",
    "pg_stat_bgwriter",
    "pg_stat_checkpointer",
    "pg_stat_io",
    "pg_stat_database",
)


@pytest.mark.parametrize(
    ("version", "views", "skipped"),
    [
        (130014, [BGWRITER, DATABASE], [WAL, CHECKPOINTER, IO]),
        (150018, [WAL, BGWRITER, DATABASE], [CHECKPOINTER, IO]),
        (160004, [WAL, BGWRITER, IO, DATABASE], [CHECKPOINTER]),
        (170002, [WAL, BGWRITER, CHECKPOINTER, IO, DATABASE], []),
    ],
)
def test_views_are_chosen_by_version(version: int, views: list[str], skipped: list[str]) -> None:
    chosen, why = choose_views(version)
    assert [v.name for v in chosen] == views
    assert list(why) == skipped
    if "pg_stat_io" in why:
        assert why["pg_stat_io"] == "needs PostgreSQL 16 or later"


def test_one_query_reads_every_view_and_the_wal_position() -> None:
    query = build_query(choose_views(170002)[0])
    assert query.startswith("SELECT json_build_object(")
    assert "'pg_stat_io', (SELECT json_agg(v) FROM pg_catalog.pg_stat_io v)" in query
    assert "'pg_stat_wal', (SELECT row_to_json(v) FROM pg_catalog.pg_stat_wal v)" in query
    assert "WHERE datname = current_database()" in query
    assert "pg_current_wal_insert_lsn()" in query and "pg_is_in_recovery()" in query


def test_pg15_recorded_deltas() -> None:
    first, last = snapshots("pg15-recorded")
    views, reset = snapshot_delta(first, last)
    assert reset == []
    assert set(views) == {"pg_stat_wal", "pg_stat_bgwriter", "pg_stat_database"}
    wal = views["pg_stat_wal"]
    assert wal["wal_bytes"] == 101578672 - 93658179
    assert wal["wal_records"] == 4583 and wal["wal_fpi"] == 971
    assert "stats_reset" not in wal  # timestamps are not counters
    database = views["pg_stat_database"]
    assert database["numbackends"] == 5  # a level: as read at the end, not a delta
    assert "datid" not in database  # row_to_json gives oids as strings
    assert database["blks_hit"] == 15379 and database["blks_read"] == 572
    assert cache_hit_ratio(database) == pytest.approx(15379 / (15379 + 572))
    assert checkpoints_from_views(views) == 1  # one completed in that second
    assert last.wal_lsn_bytes is not None and first.wal_lsn_bytes is not None
    assert last.wal_lsn_bytes - first.wal_lsn_bytes == 7376608


def test_pg16_has_pg_stat_io_and_checkpoints_in_pg_stat_bgwriter() -> None:
    views, _ = snapshot_delta(*snapshots("pg16-constructed", 10.0))
    assert checkpoints_from_views(views) == 3
    assert views["pg_stat_bgwriter"]["buffers_checkpoint"] == 4200
    rows = {(r["backend_type"], r["object"], r["context"]): r for r in views["pg_stat_io"]}
    # rows where nothing happened are left out
    assert set(rows) == {
        ("autovacuum worker", "relation", "vacuum"),
        ("client backend", "relation", "normal"),
        ("background writer", "relation", "normal"),
        ("checkpointer", "relation", "normal"),
    }
    checkpointer = rows[("checkpointer", "relation", "normal")]
    assert checkpointer["writes"] == 4200 and checkpointer["fsyncs"] == 35
    assert checkpointer["op_bytes"] == 8192  # a unit, not a counter
    assert "reads" not in checkpointer  # NULL: the checkpointer never reads
    assert rows[("client backend", "relation", "normal")]["hits"] == 380000


def test_pg17_checkpoints_moved_to_pg_stat_checkpointer() -> None:
    views, _ = snapshot_delta(*snapshots("pg17-constructed", 10.0))
    assert set(views["pg_stat_bgwriter"]) == {"buffers_clean", "maxwritten_clean", "buffers_alloc"}
    assert views["pg_stat_checkpointer"]["buffers_written"] == 4200
    assert views["pg_stat_checkpointer"]["num_requested"] == 3
    assert checkpoints_from_views(views) == 3
    assert len(views["pg_stat_io"]) == 4


@pytest.mark.parametrize("version", ["pg15-recorded", "pg16-constructed", "pg17-constructed"])
def test_series_have_the_same_names_whatever_the_version(version: str) -> None:
    first, last = snapshots(version, 2.0)
    series = snapshot_series([first, last])
    assert set(series) == {
        "pg.wal_bytes_per_s",
        "pg.wal_records_per_s",
        "pg.wal_fpi_per_s",
        "pg.wal_syncs_per_s",
        "pg.checkpoint_buffers_per_s",
        "pg.bgwriter_buffers_per_s",
        "pg.commits_per_s",
        "pg.blks_read_per_s",
        "pg.blks_hit_per_s",
    }
    [point] = series["pg.wal_bytes_per_s"]
    assert point.t == 2.0
    assert point.value == (last.wal_lsn_bytes or 0) / 2 - (first.wal_lsn_bytes or 0) / 2


def test_statistics_reset_during_the_step_is_reported_not_negative() -> None:
    first, last = snapshots("pg16-constructed")
    views, reset = snapshot_delta(last, first)  # counters going backwards: a reset
    assert "pg_stat_wal" in reset and "pg_stat_io" in reset
    assert views["pg_stat_wal"]["wal_bytes"] == 0


def test_a_standby_has_no_wal_position() -> None:
    document = json.loads((DATA / "pg15-recorded-1.json").read_text())
    document["wal_lsn_bytes"] = None
    snapshot = parse_snapshot(0.0, document)
    assert snapshot.wal_lsn_bytes is None
    assert "pg.wal_bytes_per_s" not in snapshot_series([snapshot, snapshot])


def test_a_clean_restart_continues_the_counters_and_leaves_a_gap_in_the_series() -> None:
    """Statistics survive a clean restart: the readings after it continue the stretch (the
    totals count through the outage) but no rate is drawn over the outage itself."""
    first, last = snapshots("pg15-recorded")
    after = dataclasses.replace(last, t=5.0, after_gap=True)
    views, reset = summed_delta([first, last, after])
    assert reset == [] and views == snapshot_delta(first, after)[0]
    series = snapshot_series([first, last, after])
    assert [p.t for p in series["pg.wal_bytes_per_s"]] == [1.0]


def test_a_crash_or_a_failover_starts_a_new_stretch_whose_delta_is_added() -> None:
    """After a crash the counters start again from zero (or, after a failover, are another
    server's): each stretch's delta is added; the outage between them is not counted."""
    first, last = snapshots("pg15-recorded")
    wal = "pg_stat_wal"
    moved = 1000
    reset_first = dataclasses.replace(
        first, t=5.0, stretch=1, after_gap=True, views={wal: {"wal_records": 10}}
    )
    reset_last = dataclasses.replace(
        first, t=6.0, stretch=1, views={wal: {"wal_records": 10 + moved}}
    )
    views, reset = summed_delta([first, last, reset_first, reset_last])
    assert reset == []
    one = snapshot_delta(first, last)[0][wal]
    assert isinstance(one, dict)
    assert views[wal]["wal_records"] == one["wal_records"] + moved  # type: ignore[index]
    series = snapshot_series([first, last, reset_first, reset_last])
    assert [p.t for p in series["pg.wal_records_per_s"]] == [1.0, 6.0]


@pytest.mark.parametrize(
    ("resumed_on", "went_back", "stretches"),
    [
        (None, False, [0, 0, 0, 0]),  # no outage
        ("same", False, [0, 0, 0, 0]),  # a clean restart: the counters went on
        ("same", True, [0, 0, 1, 1]),  # a crash: they started again
        ("other", False, [0, 0, 1, 1]),  # a failover: another server's
    ],
)
def test_readings_are_placed_in_stretches_and_the_next_ones_stay_in_theirs(
    resumed_on: str | None, went_back: bool, stretches: list[int]
) -> None:
    low, high = snapshots("pg15-recorded")
    # before the outage, then after it: lower counters when they went back (a crash)
    before, after = (high, low) if went_back else (low, high)
    readings = [
        dataclasses.replace(low, t=0.0),
        dataclasses.replace(before, t=1.0),
        dataclasses.replace(after, t=5.0),
        dataclasses.replace(high, t=6.0),
    ]
    previous = None
    for i, reading in enumerate(readings):
        place(previous, reading, resumed_on if i == 2 else None)
        previous = reading
    assert [r.stretch for r in readings] == stretches
    assert [r.after_gap for r in readings] == [False, False, resumed_on is not None, False]
