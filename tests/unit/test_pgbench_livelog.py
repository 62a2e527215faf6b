"""The live view from pgbench's per-transaction log: which seconds are complete, and what
they say (pure: LiveTotals; the thread is tested on a real pgbench in
tests/integration/test_pgbench_log.py)."""

from __future__ import annotations

from howfast.workloads.pgbench.livelog import DELAY_S, LiveTotals


def line(client: int, latency_us: int | str, epoch: int, usec: int = 0) -> str:
    return f"{client} 1 {latency_us} 0 {epoch} {usec}"


def test_a_second_is_reported_once_every_file_is_past_it_scaled_by_the_sampling_rate():
    totals = LiveTotals(sampling_rate=0.5)
    # thread 0 has reached second 102, thread 1 only 101: 101 is not complete yet
    totals.add_lines("tx.1", [line(0, 100, 100), line(0, 200, 101), line(0, 400, 101)])
    totals.add_lines("tx.1", [line(0, 300, 102)])
    totals.add_lines("tx.1.1", [line(1, 600, 101), "not a log line", line(1, "failed", 101)])
    # long before the clock would decide
    assert totals.complete(now_epoch=101.5, files=2) == []  # 100 is partial: never reported
    totals.add_lines("tx.1.1", [line(1, 500, 102)])
    reported = totals.complete(now_epoch=102.5, files=2)
    # second 101: 4 logged transactions (one failed, without a latency) at 1 in 2
    assert reported == [(1.0, {"tps": 8.0, "latency_ms": (200 + 400 + 600) / 3 / 1000})]
    assert totals.complete(now_epoch=102.5, files=2) == []  # reported once


def test_a_file_that_stays_behind_is_overtaken_by_the_clock():
    totals = LiveTotals(sampling_rate=None)
    totals.add_lines("tx.1", [line(0, 100, 100), line(0, 100, 101), line(0, 100, 105)])
    # the second thread's file has no line yet: only the clock decides, DELAY_S late
    assert totals.complete(now_epoch=101.9, files=2) == []
    reported = totals.complete(now_epoch=101 + DELAY_S + 0.1, files=2)
    assert [t for t, _ in reported] == [1.0]
    # a second with no logged transaction is reported as zero, not skipped
    reported = totals.complete(now_epoch=104 + DELAY_S, files=2)
    assert reported == [(2.0, {"tps": 0.0}), (3.0, {"tps": 0.0}), (4.0, {"tps": 0.0})]
