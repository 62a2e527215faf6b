"""Where a surviving load's commits are counted: which modes can be, and the one query that
counts pgbench_history rows per window (run on a real server in
tests/integration/test_surviving_load.py)."""

from __future__ import annotations

from howfast.workloads.pgbench.history import CLEANUP, count_query, not_counted


def test_only_scripts_that_insert_one_row_per_commit_are_counted():
    assert not_counted({"mode": "tpcb-like"}) is None
    assert not_counted({}) is None  # tpcb-like is the default
    assert not_counted({"mode": "simple-update"}) is None
    assert not_counted({"mode": "select-only"}) == "select-only commits nothing"
    assert not_counted({"mode": "custom", "scripts": ["a.sql"]}) == (
        "custom scripts: no table records one row per commit; not counted"
    )


def test_each_window_is_one_filtered_count_with_its_bounds_as_parameters():
    query, params = count_query([(None, 1.5), (1.5, 9.25), (9.25, None), (None, None)], 1000.0)
    text = query.as_string(None)
    assert text.startswith("SELECT count(*) FILTER (WHERE mtime < (to_timestamp(%s) AT TIME ")
    assert text.count("count(*)") == 4 and text.endswith("FROM pgbench_history")
    assert text.count("%s") == len(params) == 4
    assert params == [1001.5, 1001.5, 1009.25, 1009.25]
    assert "FILTER (WHERE true)" in text  # the whole load


def test_the_cleanup_is_pgbench_own_start_up_cleanup_that_n_skips():
    assert CLEANUP == ("VACUUM pgbench_branches", "VACUUM pgbench_tellers",
                       "TRUNCATE pgbench_history")  # fmt: skip
