"""What the replication sampler keeps (pure fold/summary) and what is derived on read from it:
lag percentiles, WAL sent and replayed, the SyncRep share, the synchronous-replication verdict
(docs/replication.md, docs/why.md)."""

from __future__ import annotations

import json
from pathlib import Path

from howfast.analysis import why
from howfast.analysis.derive import derive_step, series_needed
from howfast.analysis.replication import lag_metrics, nearest_rank, replication_metrics, sync_level
from howfast.model import RunRecord, Sample, StepRecord
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
