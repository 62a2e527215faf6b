"""Storage probe analysis on step records built by hand: rows, the commit-rate ceiling against
pgbench, the terminal table; and the pure trust checks of the fio executor."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from howfast.analysis.probe import commit_ceiling
from howfast.analysis.summary import summarize
from howfast.hosts.base import ToolResult
from howfast.model import JSONValue, RunRecord, StepRecord, TargetRecord
from howfast.report.terminal import run_summary
from howfast.workloads.fio.checks import (
    IoChoice,
    choose_direct,
    commit_metrics,
    imported_warnings,
    run_warnings,
)
from howfast.workloads.fio.imports import fio_job_params
from howfast.workloads.fio.parse import parse_output
from howfast.workloads.fio.report import fio_row
from howfast.workloads.fio.workload import error_tail, histograms_us, prefill_warning, space_problem
from howfast.workloads.pg_test_fsync.report import fsync_result

DATA = Path(__file__).resolve().parents[1] / "data" / "fio"
MIB = 1 << 20
GIB = 1 << 30
T = "2026-01-01T00:00:00+00:00"


def step(
    workload: str,
    params: dict[str, JSONValue],
    metrics: dict[str, JSONValue],
    *,
    target: str = "/mnt/a",
    status: str = "completed",
    warnings: list[str] | None = None,
) -> StepRecord:
    return StepRecord(
        target=target,
        workload=workload,
        params=params,
        status=status,  # type: ignore[arg-type]
        started_at=T,
        finished_at=T,
        metrics=metrics,
        warnings=warnings or [],
    )


def wal_fsync(write_ms: float, sync_ms: float, **kw: object) -> StepRecord:
    metrics = {"write_iops": 1000.0, "write_lat_avg_ms": write_ms, "sync_lat_avg_ms": sync_ms}
    return step("fio", {"profile": "wal-fsync"}, metrics, **kw)  # type: ignore[arg-type]


def tpcb(clients: int, tps: float, latency_ms: float = 1.0, **kw: object) -> StepRecord:
    params = {"mode": "tpcb-like", "clients": clients, "duration_s": 10}
    metrics = {"tps": tps, "latency_avg_ms": latency_ms}
    return step("pgbench", params, metrics, **kw)  # type: ignore[arg-type]


def run_of(steps: list[StepRecord], targets: list[TargetRecord]) -> RunRecord:
    return RunRecord(1, "quick", "completed", T, T, {}, targets, steps)


# --- the commit-rate ceiling ----------------------------------------------------------------


def test_ceiling_is_one_second_over_write_plus_flush_and_pgbench_sits_beside_it() -> None:
    steps = [
        wal_fsync(0.1, 0.4),  # 0.5 ms per commit: 2000 commits/s
        step("pg_test_fsync", {"seconds": 2}, {"fdatasync_ops_s": 2500.0}),
        tpcb(1, 500.0, latency_ms=2.0),
        tpcb(4, 1500.0),  # not one connection: not compared
    ]
    c = commit_ceiling(steps)
    assert c is not None
    assert c.flush_ms == pytest.approx(0.5)
    assert (c.write_ms, c.sync_ms) == pytest.approx((0.1, 0.4))
    assert c.ceiling_tps == pytest.approx(2000.0)
    assert c.pg_test_fsync_ops_s == 2500.0
    assert c.pgbench_tps == 500.0 and c.pgbench_latency_ms == 2.0
    assert c.share == pytest.approx(0.25)
    assert not c.above_ceiling and c.flushes_off is None


def test_repetitions_are_averaged_and_failed_steps_ignored() -> None:
    steps = [
        wal_fsync(0.0, 1.0),
        wal_fsync(0.0, 3.0),  # mean flush 2 ms: 500/s
        wal_fsync(0.0, 0.001, status="failed"),
        tpcb(1, 100.0),
        tpcb(1, 300.0),
        tpcb(1, 9999.0, status="failed"),
    ]
    c = commit_ceiling(steps)
    assert c is not None
    assert c.ceiling_tps == pytest.approx(500.0)
    assert c.pgbench_tps == pytest.approx(200.0)
    assert c.share == pytest.approx(0.4)


def test_no_ceiling_without_a_flushing_fio_step() -> None:
    randrw = step("fio", {"profile": "randrw-4k-qd1"}, {"read_iops": 5.0, "write_iops": 5.0})
    assert commit_ceiling([randrw, tpcb(1, 100.0)]) is None
    assert commit_ceiling([wal_fsync(0.1, 0.4, status="failed")]) is None


def test_ceiling_without_pgbench_has_no_share() -> None:
    c = commit_ceiling([wal_fsync(0.05, 0.95)])
    assert c is not None and c.ceiling_tps == pytest.approx(1000.0)
    assert c.pgbench_tps is None and c.share is None and not c.above_ceiling


def test_an_imported_job_that_syncs_stands_in_for_wal_fsync() -> None:
    imported = step(
        "fio", {"profile": "fdatasync-8k"}, {"write_lat_avg_ms": 0.2, "sync_lat_avg_ms": 0.8}
    )
    c = commit_ceiling([imported])
    assert c is not None and c.ceiling_tps == pytest.approx(1000.0)


def test_faster_than_the_ceiling_is_flagged_and_explained_by_settings() -> None:
    steps = [wal_fsync(0.0, 2.0), tpcb(1, 2000.0)]  # ceiling 500/s, PostgreSQL 2000/s
    c = commit_ceiling(steps)
    assert c is not None and c.above_ceiling and c.flushes_off is None
    c = commit_ceiling(steps, {"synchronous_commit": "off"})
    assert c is not None and c.flushes_off == "synchronous_commit=off"


def test_each_target_gets_its_own_ceiling_and_pgbench() -> None:
    a, b = "/mnt/a", "/mnt/b"
    steps = [
        wal_fsync(0.0, 1.0, target=a),
        wal_fsync(0.0, 4.0, target=b),
        tpcb(1, 400.0, target=a),
        tpcb(1, 100.0, target=b),
    ]
    targets = [TargetRecord(a, "local"), TargetRecord(b, "local")]
    summaries = {s.name: s for s in summarize(run_of(steps, targets))}
    ceiling_a = summaries[a].ceiling
    ceiling_b = summaries[b].ceiling
    assert ceiling_a is not None and ceiling_b is not None
    assert (ceiling_a.ceiling_tps, ceiling_a.share) == pytest.approx((1000.0, 0.4))
    assert (ceiling_b.ceiling_tps, ceiling_b.share) == pytest.approx((250.0, 0.4))
    # Each target's steps are its own, by workload.
    assert [s.metrics["tps"] for s in summaries[a].steps_of("pgbench")] == [400.0]
    assert [s.all_params["profile"] for s in summaries[a].steps_of("fio")] == ["wal-fsync"]


# --- rows and tables --------------------------------------------------------------------------


def test_fio_row_adds_read_and_write_bandwidth() -> None:
    metrics = {
        "read_iops": 100.0,
        "write_iops": 50.0,
        "read_mbps": 1.5,
        "write_mbps": 0.5,
        "read_lat_avg_ms": 0.1,
        "read_lat_p99_ms": 0.3,
    }
    row = fio_row(step("fio", {"profile": "randrw-4k-qd1", "repetition": 2}, metrics))
    assert (row.profile, row.repetition, row.mbps) == ("randrw-4k-qd1", 2, 2.0)
    assert (row.read_lat_avg_ms, row.read_lat_p99_ms, row.sync_lat_avg_ms) == (0.1, 0.3, None)


def test_fsync_result_keeps_wal_sync_methods_in_pg_test_fsync_order() -> None:
    metrics: dict[str, JSONValue] = {
        "fsync_ops_s": 900.0,
        "fsync_usecs": 1111.0,
        "fdatasync_ops_s": 1000.0,
        "fdatasync_usecs": 1000.0,
        "open_sync_2x8kb_ops_s": 10.0,  # not a wal_sync_method
        "best_wal_sync_method": "fdatasync",
    }
    result = fsync_result(step("pg_test_fsync", {"seconds": 1}, metrics))
    assert [m.method for m in result.methods] == ["fdatasync", "fsync"]
    assert result.best == "fdatasync"


def test_no_probe_table_without_probe_steps() -> None:
    text = render(run_of([tpcb(1, 100.0)], [TargetRecord("/mnt/a", "local")]))
    assert "pgbench tpcb-like" in text
    assert "storage probe" not in text and "pg_test_fsync" not in text
    assert "commit rate of one connection" not in text


def render(run: RunRecord) -> str:
    out = io.StringIO()
    Console(file=out, width=160, color_system=None).print(run_summary(run))
    return out.getvalue()


def test_table_shows_each_profile_numbered_warnings_once_and_the_ceiling() -> None:
    tmpfs = "x is on tmpfs"
    steps = [
        wal_fsync(0.1, 0.4, warnings=[tmpfs]),
        step(
            "fio",
            {"profile": "randrw-4k-qd1"},
            {"read_iops": 6001.0, "write_iops": 6176.0, "read_lat_avg_ms": 0.082},
            warnings=[tmpfs, "buffered I/O"],
        ),
        step("fio", {"profile": "seq-read-8k-qd32"}, {}, status="failed", warnings=[]),
        step("pg_test_fsync", {"seconds": 1}, {}, status="skipped"),
        tpcb(1, 500.0),
    ]
    steps[2] = replace(steps[2], error="fio exited with status 1:\nfio: something broke")
    steps[3] = replace(steps[3], error="pg_test_fsync not found in /usr/lib/postgresql/15/bin")
    text = render(run_of(steps, [TargetRecord("/mnt/a", "local")]))
    assert "wal-fsync" in text and "randrw-4k-qd1" in text
    assert "6,001" in text and "0.082 / –" in text
    assert "0.100 / –" in text and "0.400 / –" in text  # write and sync latency of wal-fsync
    assert "[1][2]" in text and f"[1] {tmpfs}" in text and "[2] buffered I/O" in text
    assert text.count(tmpfs) == 1
    assert "failed: fio exited with status 1" in text
    assert "pg_test_fsync: skipped: pg_test_fsync not found" in text
    assert "2,000" in text  # the ceiling, commits/s
    assert "pgbench tpcb-like, 1 client: 25% of the ceiling" in text


# --- the executor's trust checks (pure) -------------------------------------------------------

BUFFERED = {"direct": "0", "rw": "randrw"}
DIRECT = {"direct": "1", "rw": "randrw"}
WAL = {"direct": "0", "rw": "write", "fdatasync": "1"}


def warnings_for(fstype: str, refused: bool, options: dict[str, str], size: int) -> list[str]:
    return run_warnings(
        directory="/d",
        fstype=fstype,
        choice=choose_direct(fstype, refused),
        options=options,
        size_bytes=size,
        memory_bytes=4 * GIB,
    )


def test_direct_io_on_a_disk_filesystem_has_no_warning() -> None:
    assert choose_direct("ext4", refused=False) == IoChoice(True)
    assert warnings_for("ext4", False, DIRECT, 32 * MIB) == []


def test_tmpfs_is_buffered_and_warns_memory_page_cache_and_size() -> None:
    assert choose_direct("tmpfs", refused=False).direct is False  # even where O_DIRECT opens
    assert choose_direct("ramfs", refused=True) == IoChoice(
        False, "ramfs refuses direct I/O (O_DIRECT)"
    )
    found = warnings_for("tmpfs", False, BUFFERED, 32 * MIB)
    assert len(found) == 3
    assert "/d is on tmpfs, which lives in memory" in found[0]
    assert "buffered I/O: tmpfs keeps files in memory" in found[1]
    assert "smaller than memory (4 GiB)" in found[2] and "32 MiB" in found[2]


def test_a_filesystem_refusing_o_direct_warns_page_cache_and_size_only_when_smaller() -> None:
    small = warnings_for("ext4", True, BUFFERED, 32 * MIB)
    assert len(small) == 2 and "ext4 refuses direct I/O (O_DIRECT)" in small[0]
    large = warnings_for("ext4", True, BUFFERED, 8 * GIB)
    assert len(large) == 1 and "page cache" in large[0]


def test_flushing_every_write_is_not_flattered_by_the_page_cache() -> None:
    assert warnings_for("ext4", True, WAL, 32 * MIB) == []
    # On tmpfs the flush itself is free: only that is said.
    assert len(warnings_for("tmpfs", False, WAL, 32 * MIB)) == 1


def test_imported_results_are_checked_from_their_options() -> None:
    assert imported_warnings(DIRECT) == []
    assert imported_warnings(WAL) == []
    assert "page cache" in imported_warnings(BUFFERED)[0]
    assert "latencies are not measured" in imported_warnings({**DIRECT, "gtod_reduce": "1"})[0]


def test_space_problem_says_how_much_is_needed_and_free() -> None:
    assert space_problem(Path("/d"), 16 * MIB, free=100 * MIB) is None
    assert space_problem(Path("/d"), 16 * MIB, free=None) is None  # size unknown (ramfs)
    message = space_problem(Path("/d"), 1 * GIB, free=512 * MIB)
    assert message is not None
    assert "not enough free space in /d" in message
    assert "1.0 GiB" in message and "512 MiB free" in message


def test_prefill_warning_compares_what_the_prefill_wrote_with_the_file_size() -> None:
    output = (DATA / "fio-3.33_wal-fsync.json").read_text()  # a 32 MiB file, fully written
    assert prefill_warning(output, 32 * MIB) is None
    assert "prefill wrote 32 MiB of the 64 MiB" in str(prefill_warning(output, 64 * MIB))
    foreign = (DATA / "fio-2.15_constructed.json").read_text()
    assert "no prefill job" in str(prefill_warning(foreign, 32 * MIB))


def test_histograms_become_whole_microseconds() -> None:
    bins = {"sync_lat": {1_400: 2, 1_600: 3, 2_499: 1, 1_000_000: 7}}
    assert histograms_us(bins) == {"sync_lat_us": {1: 2, 2: 4, 1000: 7}}


def test_commit_metrics_only_for_jobs_that_synced() -> None:
    assert commit_metrics({"write_lat_avg_ms": 0.1}) == {}
    m = commit_metrics({"write_lat_avg_ms": 0.1, "sync_lat_avg_ms": 0.4})
    assert m == pytest.approx({"commit_latency_ms": 0.5, "commit_ceiling_tps": 2000.0})


def test_imported_job_params_come_from_its_options() -> None:
    result = parse_output((DATA / "fio-2.15_constructed.json").read_text())
    randrw = fio_job_params(result.jobs[0], result.fio_version)
    assert randrw == {
        "profile": "randrw-qd1",
        "size_bytes": 32 * MIB,
        "runtime_s": 2,
        "direct": True,
        "rw": "randrw",
        "rwmixread": 50,
        "bs": "4k",
        "iodepth": 1,
        "ioengine": "libaio",
        "fio_version": result.fio_version,
    }
    assert fio_job_params(result.jobs[1], result.fio_version)["fdatasync"] == 1


def test_a_failed_or_killed_tool_is_reported_with_its_last_lines() -> None:
    failed = ToolResult(1, "", "fio: io_u error on file /d/f: No space left on device\n\n")
    assert error_tail(failed, "fio") == (
        "fio exited with status 1:\nfio: io_u error on file /d/f: No space left on device"
    )
    assert error_tail(ToolResult(-9, "", ""), "fio") == "fio was killed by SIGKILL"
    many = ToolResult(2, "", "\n".join(f"line {n}" for n in range(20)))
    assert error_tail(many, "pg_test_fsync").splitlines()[1:] == [
        f"line {n}" for n in range(12, 20)
    ]
