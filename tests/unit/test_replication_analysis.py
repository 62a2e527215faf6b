"""What the replication sampler keeps (pure fold/summary) and what is derived on read from it:
lag percentiles, WAL sent and replayed, the SyncRep share, the synchronous-replication verdict
(docs/replication.md, docs/why.md)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from rich.table import Table as RichTable

from howfast.analysis import why
from howfast.analysis.compare import compare_runs
from howfast.analysis.derive import derive_run, derive_step, series_needed
from howfast.analysis.replication import (
    design_rows,
    lag_metrics,
    nearest_rank,
    replication_metrics,
    sync_level,
)
from howfast.model import RunRecord, Sample, StepRecord, TargetRecord
from howfast.report.replication_view import compare_parts, design_parts, design_table
from howfast.samplers.replication import fold, summarise
from howfast.targets.replicas.state import parse_state

DATA = Path(__file__).parent.parent / "data" / "replication"


def _busy() -> list[list[str | None]]:
    rows: list[list[str | None]] = json.loads((DATA / "busy.json").read_text())
    return rows


def test_readings_fold_into_series_and_a_section() -> None:
    """Three readings made from the recorded rows: the first before the load (positions only),
    then two with the WAL 1 MB further on and a NULL flush lag in the last."""
    first = _busy()
    second = [list(r) for r in first]
    third = [list(r) for r in first]
    for row in second:
        row[4] = row[7] = str(int(str(row[4])) + 1_000_000)
    for row in third:
        row[4] = str(int(str(row[4])) + 2_000_000)
        row[7] = str(int(str(row[7])) + 1_500_000)
        row[9] = None
    third[1][1] = "catchup"
    seen: dict = {}
    fold(seen, 0.0, parse_state(first), lags=False)
    fold(seen, 1.0, parse_state(second))
    fold(seen, 2.0, parse_state(third))
    s1 = seen["standby_1"].series
    assert [p.value for p in s1["replication.standby_1.write_lag_ms"]] == [0.335, 0.335]
    assert [p.value for p in s1["replication.standby_1.flush_lag_ms"]] == [1.056]  # NULL: absent
    assert [p.value for p in s1["replication.standby_1.sent_bytes_per_s"]] == [1e6, 1e6]
    assert s1["replication.standby_1.unreplayed_bytes"][-1].value == 500_000.0
    section, warnings = summarise(seen, 2, ["standby_2"])
    standbys = section["standbys"]
    assert isinstance(standbys, dict)
    assert standbys["standby_1"] == {
        "state": "streaming",
        "sync_state": "sync",
        "sync_priority": 1,
        "sent_bytes": 2_000_000,
        "replayed_bytes": 1_500_000,
        "lag_readings": 6,
        "lag_nulls": 1,
    }
    assert warnings == [
        'standby_2 was "catchup" for 1 of 2 readings (not streaming)',
        "the replication slot standby_2 lost WAL its standby still needed "
        "(max_slot_wal_keep_size): the standby cannot catch up",
    ]


def test_nearest_rank() -> None:
    assert nearest_rank([], 50) is None
    assert nearest_rank([3.0, 1.0, 2.0], 50) == 2.0
    assert nearest_rank([float(i) for i in range(1, 101)], 99) == 99.0
    assert nearest_rank([5.0], 99) == 5.0


def test_the_worst_standby_gives_the_lag() -> None:
    series = {
        "replication.standby_1.flush_lag_ms": [Sample(t, v) for t, v in enumerate([1, 1, 9])],
        "replication.standby_2.flush_lag_ms": [Sample(t, v) for t, v in enumerate([2, 2, 3])],
    }
    found = lag_metrics(series, ["standby_1", "standby_2"])
    assert found == {"replication_flush_lag_p50_ms": 2.0, "replication_flush_lag_p99_ms": 3.0}


def _step(syncrep: int, commit: int, cpu: int, lags: list[float]) -> StepRecord:
    counts = {"IPC:SyncRep": syncrep, "IO:WALSync": commit, "CPU": cpu}
    return StepRecord(
        "/mnt/a",
        "pgbench",
        {"mode": "tpcb-like", "clients": 1, "scale": 1},
        "completed",
        "2026-11-25T21:00:00Z",
        "2026-11-25T21:00:10Z",
        metrics={"tps": 500.0},
        series={
            "replication.standby_1.flush_lag_ms": [Sample(t, v) for t, v in enumerate(lags)],
            "replication.standby_1.write_lag_ms": [Sample(t, v / 4) for t, v in enumerate(lags)],
        },
        sections={
            "postgres": {
                "wait_sampling": {
                    "source": "pg_stat_activity",
                    "readings": 100,
                    "active_samples": syncrep + commit + cpu,
                    "counts": counts,
                    "states": {"active": syncrep + commit + cpu},
                },
                "replication": {
                    "source": "pg_stat_replication",
                    "readings": 10,
                    "standbys": {
                        "standby_1": {
                            "state": "streaming",
                            "sync_state": "sync",
                            "sent_bytes": 4096,
                            "replayed_bytes": 2048,
                        },
                    },
                },
            }
        },
    )


def test_a_step_waiting_for_its_standby_is_limited_by_synchronous_replication() -> None:
    step = _step(syncrep=46, commit=28, cpu=26, lags=[1.9, 1.8, 2.5, 1.9])
    derived = derive_step(
        step,
        [],
        target_settings={
            "synchronous_standby_names": "FIRST 1 (standby_1)",
            "synchronous_commit": "on",
        },
    )
    m = derived.metrics
    assert m["wait_syncrep_share"] == 0.46
    assert m["replication_flush_lag_p50_ms"] == 1.9 and m["replication_flush_lag_p99_ms"] == 2.5
    assert m["replication_write_lag_p50_ms"] == 0.475
    assert m["replication_sent_bytes"] == 4096 and m["replication_replayed_bytes"] == 2048
    # 1 client at 500 TPS: 2 ms active per transaction, 46% of it waiting for the standby
    assert m["commit_syncrep_wait_ms"] == 0.92
    # The commit split (sync on: local flush, the hop and the standby's write, its flush)
    assert m["commit_local_flush_ms"] == 0.56  # IO:WALSync 28% of 2 ms
    assert m["commit_replication_rtt_ms"] == 0.475  # the write lag p50
    assert m["commit_standby_flush_ms"] == 1.425  # flush lag p50 - write lag p50
    assert "commit_standby_apply_ms" not in m  # on does not wait for the replay
    assert m["wait_commit_share"] == 0.74  # the commit path keeps SyncRep, as before
    why_ = derived.sections["why"]
    assert why_["verdict"] == "synchronous replication"
    assert (
        why_["verdict_reason"] == "46% of active time waiting for the standby; flush lag p50 1.9 ms"
    )
    assert why_["also"] == []  # 28% in local flushes: under the storage-latency rule
    assert why.sentence("/mnt/a", derived.all_params, why_) == (
        "On /mnt/a, tpcb-like at 1 client is limited by synchronous replication: 46% of "
        "active time waiting for the standby; flush lag p50 1.9 ms"
    )


def test_asynchronous_standbys_split_nothing_but_the_local_flush() -> None:
    step = _step(syncrep=0, commit=50, cpu=50, lags=[1.0])
    m = derive_step(step, [], target_settings={"synchronous_standby_names": ""}).metrics
    assert m["commit_local_flush_ms"] == 1.0 and m["wait_syncrep_share"] == 0
    assert "commit_replication_rtt_ms" not in m and "commit_standby_flush_ms" not in m
    apply = {
        "synchronous_standby_names": "FIRST 1 (standby_1)",
        "synchronous_commit": "remote_apply",
    }
    m = derive_step(step, [], target_settings=apply).metrics
    assert m["commit_replication_rtt_ms"] == 0.25 and m["commit_standby_flush_ms"] == 0.75
    assert "commit_standby_apply_ms" not in m  # no replay lag was recorded: no part


def test_storage_latency_wins_when_local_flushes_are_larger() -> None:
    step = _step(syncrep=31, commit=50, cpu=19, lags=[0.5])
    verdict = derive_step(step, []).sections["why"]
    assert verdict["verdict"] == "storage latency"
    assert verdict["also"] == ["synchronous replication"]


def test_remote_apply_names_the_replay_lag() -> None:
    apply = {"synchronous_standby_names": "FIRST 1 (s)", "synchronous_commit": "remote_apply"}
    assert sync_level(apply) == "replay"
    assert sync_level({"synchronous_standby_names": "", "synchronous_commit": "on"}) is None
    assert sync_level({"synchronous_standby_names": "FIRST 1 (s)"}) == "flush"


def test_a_step_without_standbys_gets_no_replication_figures() -> None:
    step = _step(syncrep=0, commit=60, cpu=40, lags=[])
    del step.sections["postgres"]["replication"]
    assert replication_metrics(step, None) == {}
    assert "wait_syncrep_share" not in derive_step(step, []).metrics


def test_reading_a_run_loads_the_lag_series() -> None:
    run = RunRecord(1, "quick", "completed", "", None, {}, [], [_step(1, 1, 1, [1.0])])
    assert {
        "replication.standby_1.write_lag_ms",
        "replication.standby_1.flush_lag_ms",
        "replication.standby_1.replay_lag_ms",
    } <= series_needed(run)


# -- the designs side by side ------------------------------------------------------------------


def _design_run() -> RunRecord:
    """Two targets of a `replication` run: the directory alone and with a sync standby,
    1 and 4 clients (the second target's 1-client test twice)."""

    def pgbench(target: str, clients: int, tps: float, p99: float, standby: bool) -> StepRecord:
        step = _step(syncrep=40 if standby else 0, commit=40, cpu=20, lags=[1.5, 2.0, 1.0])
        step = replace(step, target=target, metrics={"tps": tps, "latency_p99_ms": p99})
        step.params["clients"] = clients
        if not standby:
            del step.sections["postgres"]["replication"]
        return step

    def load(target: str, seconds: float) -> StepRecord:
        return StepRecord(target, "pgbench-init", {"scale": 1}, "completed", "", "",
                          metrics={"init_total_s": seconds})  # fmt: skip

    steps = [
        load("/a", 2.5),
        pgbench("/a", 1, 400.0, 4.0, False),
        pgbench("/a", 4, 1200.0, 6.0, False),
        load("/a with 1 sync standby (on)", 3.5),
        pgbench("/a with 1 sync standby (on)", 1, 300.0, 5.0, True),
        pgbench("/a with 1 sync standby (on)", 1, 320.0, 5.5, True),
        pgbench("/a with 1 sync standby (on)", 4, 1000.0, 7.0, True),
    ]
    targets = [
        TargetRecord("/a", "local", settings={}),
        TargetRecord("/a with 1 sync standby (on)", "local", settings={
            "synchronous_standby_names": "FIRST 1 (standby_1)", "synchronous_commit": "on"}),
    ]  # fmt: skip
    return derive_run(RunRecord(3, "replication", "completed", "", None, {}, targets, steps))


def test_design_rows_put_the_designs_side_by_side() -> None:
    plain, standby = design_rows(_design_run())
    assert (plain.design, plain.standbys, plain.load_s) == ("no standby", 0, 2.5)
    assert plain.tps == {1: 400.0, 4: 1200.0} and plain.p99_ms == {1: 4.0, 4: 6.0}
    assert plain.syncrep_share is None and plain.sync_lag_p50_ms is None  # no standby: no figure
    assert (standby.design, standby.standbys, standby.load_s) == ("1 sync standby (on)", 1, 3.5)
    assert standby.tps == {1: 310.0, 4: 1000.0}  # the mean of the 1-client repetitions
    assert standby.p99_ms == {1: 5.25, 4: 7.0}
    assert standby.syncrep_share == 0.4 and standby.sync_lag_p50_ms == 1.5
    # 1 client at 300 and 320 TPS: 40% of 3.33 and 3.125 ms active per transaction
    assert standby.commit_syncrep_wait_ms == pytest.approx((1.333 + 1.25) / 2, abs=0.001)


def test_a_step_with_events_is_not_the_designs_figure() -> None:
    """A failover step ran partly on the promoted standby, without the design's standby; a
    restart step's TPS holds its outage: neither is the design's TPS, p99 or SyncRep share."""
    run = _design_run()
    steps = list(run.steps)
    params = {**steps[-1].params, "events": ["5s:failover"], "clients": 8}
    event_step = replace(steps[-1], params=params, metrics={"tps": 50.0, "latency_p99_ms": 90.0})
    run = derive_run(replace(run, steps=[*steps, event_step]))
    _, standby = design_rows(run)
    assert standby.design == "1 sync standby (on)"
    assert standby.tps == {1: 310.0, 4: 1000.0} and 8 not in standby.p99_ms


def test_the_design_table_is_shown_for_the_replication_plan() -> None:
    run = _design_run()
    table = design_table(run)
    assert table is not None
    assert [c.text for c in table.rows[1]] == [
        "/a with 1 sync standby (on)", "1 sync standby (on)", "3.5", "1: 310 / 4: 1,000",
        "1: 5.25 / 4: 7.00", "40%", "1.50", "1.29", "1.29 + 0.38 + 1.12", "–",
    ]  # fmt: skip
    assert [c.text for c in table.rows[0]][:3] == ["/a", "no standby", "2.5"]
    plain = replace(run, plan="quick", targets=run.targets[:1],
                    steps=[s for s in run.steps if s.target == "/a"])  # fmt: skip
    assert design_table(plain) is None and design_parts(plain) == []
    assert len(design_parts(run)) == 1


def test_compare_lists_each_runs_designs() -> None:
    first, second = _design_run(), replace(_design_run(), id=4)
    comparison = compare_runs([first, second])
    designs = comparison.document()["designs"]
    assert isinstance(designs, list)
    assert [(d["run"], d["design"]) for d in designs] == [  # type: ignore[index]
        ("3", "no standby"), ("3", "1 sync standby (on)"),
        ("4", "no standby"), ("4", "1 sync standby (on)"),
    ]  # fmt: skip
    assert designs[1]["tps"] == {"1": 310.0, "4": 1000.0}  # type: ignore[index]
    (table,) = compare_parts(comparison.designs)
    assert isinstance(table, RichTable) and table.row_count == 4
    plain = replace(first, plan="quick", targets=first.targets[:1],
                    steps=[s for s in first.steps if s.target == "/a"])  # fmt: skip
    assert compare_runs([plain, plain]).designs == []


def test_the_designs_bytes_written_per_transaction() -> None:
    """The primary's own writes plus each standby's (its cgroup's, in the server-I/O
    sampler's shape), over the step's transactions."""
    step = _step(syncrep=40, commit=40, cpu=20, lags=[1.0])
    step.metrics["transactions"] = 1000
    step.sections["io"] = {
        "postgres": {"source": "cgroup v2 + /proc/PID/io", "seconds": 10.0,
                     "cgroup_total": {"read_bytes": 0, "write_bytes": 3_000_000,
                                      "read_ios": 0, "write_ios": 300},
                     "proc": {"read_bytes": 0, "write_bytes": 2_000_000}},
        "standbys": {
            "standby_1": {"source": "cgroup v2 + /proc/PID/io", "seconds": 10.0,
                          "cgroup_total": {"read_bytes": 0, "write_bytes": 1_000_000,
                                           "read_ios": 0, "write_ios": 100},
                          "proc": {"read_bytes": 0, "write_bytes": 900_000}},
        },
    }  # fmt: skip
    m = derive_step(step, []).metrics
    assert m["pg_write_bytes"] == 3_000_000
    assert m["standby_write_bytes"] == 1_000_000
    assert m["design_write_bytes"] == 4_000_000 and m["design_write_bytes_per_tx"] == 4000.0
    del step.sections["io"]["standbys"]["standby_1"]["cgroup_total"]
    assert derive_step(step, []).metrics["standby_write_bytes"] == 900_000  # /proc/PID/io
    step.sections["io"]["standbys"]["standby_2"] = {"source": "/proc/PID/io"}
    assert "standby_write_bytes" not in derive_step(step, []).metrics  # one unaccounted for
