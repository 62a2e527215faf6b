"""pg_test_fsync command line and parser, against recorded outputs (tests/data/pg_test_fsync)."""

from __future__ import annotations

from pathlib import Path

import pytest

from howfast.workloads.pg_test_fsync.parse import (
    NON_SYNCED,
    NON_WRITE_FD,
    ONE_WRITE,
    OPEN_SYNC_SIZES,
    TWO_WRITES,
    FsyncTest,
    build_argv,
    metrics,
    parse,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "pg_test_fsync"


def data(name: str) -> str:
    return (DATA / name).read_text()


def test_build_argv() -> None:
    assert build_argv("/usr/lib/postgresql/15/bin/pg_test_fsync", "/mnt/x/f.out", 5) == [
        "/usr/lib/postgresql/15/bin/pg_test_fsync",
        "-f",
        "/mnt/x/f.out",
        "-s",
        "5",
    ]
    with pytest.raises(ValueError):
        build_argv("pg_test_fsync", "f", 0)


def test_pg15_real_output() -> None:
    tests = parse(data("pg15_ext4_real.txt"))
    assert len(tests) == 18
    assert tests[0] == FsyncTest(ONE_WRITE, "open_datasync", 8017.278, 125.0, True)
    assert tests[1] == FsyncTest(ONE_WRITE, "fdatasync", 8241.456, 121.0, True)
    assert tests[3] == FsyncTest(ONE_WRITE, "fsync_writethrough", None, None, False)
    assert tests[6] == FsyncTest(TWO_WRITES, "fdatasync", 7100.162, 141.0, True)
    assert tests[10] == FsyncTest(
        OPEN_SYNC_SIZES, "1 * 16kB open_sync write", 7486.536, 134.0, True
    )
    assert tests[14] == FsyncTest(
        OPEN_SYNC_SIZES, "16 *  1kB open_sync writes", 451.850, 2213.0, True
    )
    assert tests[15] == FsyncTest(NON_WRITE_FD, "write, fsync, close", 6560.488, 152.0, True)
    assert tests[17] == FsyncTest(NON_SYNCED, "write", 926086.735, 1.0, True)
    assert [t.section for t in tests].count(ONE_WRITE) == 5


def test_pg15_metrics() -> None:
    m = metrics(parse(data("pg15_ext4_real.txt")))
    assert m["fdatasync_ops_s"] == 8241.456
    assert m["fdatasync_usecs"] == 121.0
    assert m["open_datasync_ops_s"] == 8017.278
    assert m["fsync_usecs"] == 147.0
    assert m["open_sync_ops_s"] == 7882.496
    assert "fsync_writethrough_ops_s" not in m  # n/a on Linux
    assert m["two_writes_fdatasync_ops_s"] == 7100.162
    assert m["two_writes_open_sync_usecs"] == 271.0
    assert m["open_sync_1x16kb_ops_s"] == 7486.536
    assert m["open_sync_2x8kb_ops_s"] == 3851.898
    assert m["open_sync_16x1kb_usecs"] == 2213.0
    assert m["write_fsync_close_ops_s"] == 6560.488
    assert m["write_close_fsync_ops_s"] == 6828.269
    assert m["nonsync_write_ops_s"] == 926086.735
    assert m["best_wal_sync_method"] == "fdatasync"
    assert m["best_wal_sync_ops_s"] == 8241.456
    assert m["best_wal_sync_usecs"] == 121.0
    assert len(m) == 35


def test_pg10_format_without_direct_io() -> None:
    tests = parse(data("pg10_ext4_journal_constructed.txt"))
    assert len(tests) == 18  # the "* This file system..." footnotes are not results
    unsupported = [(t.section, t.method) for t in tests if not t.supported]
    assert unsupported == [
        (ONE_WRITE, "open_datasync"),
        (ONE_WRITE, "fsync_writethrough"),
        (ONE_WRITE, "open_sync"),
        (TWO_WRITES, "open_datasync"),
        (TWO_WRITES, "fsync_writethrough"),
        (TWO_WRITES, "open_sync"),
        (OPEN_SYNC_SIZES, "1 * 16kB open_sync write"),
        (OPEN_SYNC_SIZES, "2 *  8kB open_sync writes"),
        (OPEN_SYNC_SIZES, "4 *  4kB open_sync writes"),
        (OPEN_SYNC_SIZES, "8 *  2kB open_sync writes"),
        (OPEN_SYNC_SIZES, "16 *  1kB open_sync writes"),
    ]
    assert tests[1] == FsyncTest(ONE_WRITE, "fdatasync", 1843.215, 543.0, True)
    assert tests[-1] == FsyncTest(NON_SYNCED, "write", 302114.568, 3.0, True)  # "Non-Sync'ed"
    m = metrics(tests)
    assert m["fdatasync_ops_s"] == 1843.215
    assert m["fsync_usecs"] == 832.0
    assert m["two_writes_fdatasync_usecs"] == 671.0
    assert "open_datasync_ops_s" not in m
    assert not any(key.startswith("open_sync_") for key in m)
    assert m["write_close_fsync_ops_s"] == 1176.918
    assert m["best_wal_sync_method"] == "fdatasync"
    assert m["best_wal_sync_ops_s"] == 1843.215


def test_old_lines_without_usecs_per_op() -> None:
    text = (
        "2 seconds per test\n"
        "\n"
        "Compare file sync methods using one 8kB write:\n"
        "        open_datasync                     2000.000 ops/sec\n"
        "        fdatasync                         2500.000 ops/sec\n"
    )
    tests = parse(text)
    assert tests == [
        FsyncTest(ONE_WRITE, "open_datasync", 2000.0, None, True),
        FsyncTest(ONE_WRITE, "fdatasync", 2500.0, None, True),
    ]
    m = metrics(tests)
    assert m["open_datasync_usecs"] == 500.0  # 10^6 / ops, as pg_test_fsync computes it
    assert m["best_wal_sync_method"] == "fdatasync"
    assert m["best_wal_sync_usecs"] == 400.0


def test_interrupted_output_keeps_finished_lines() -> None:
    text = data("pg15_ext4_real.txt").split("        fsync  ")[0] + "        fsync          \n"
    tests = parse(text)
    assert [t.method for t in tests] == ["open_datasync", "fdatasync"]


def test_no_results_is_an_error() -> None:
    with pytest.raises(ValueError, match="no pg_test_fsync results"):
        parse("pg_test_fsync: error: could not open output file: Permission denied\n")
