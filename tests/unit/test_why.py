"""Wait profiles from recorded pg_stat_activity rows, PostgreSQL's own I/O counters, and the
verdict rules of docs/why.md."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from howfast.analysis import why
from howfast.analysis.derive import derive_step
from howfast.machine.serverio import parse_blkio_v1, parse_io_stat, parse_proc_io
from howfast.metrics.families import wait_event_shares
from howfast.model import StepRecord
from howfast.samplers.server_figures import ProcessIo
from howfast.samplers.waits import Second, per_second_series, profile_increments, tally_activity

DATA = Path(__file__).parent.parent / "data" / "pgstats"


def _readings(name: str) -> list[list[dict]]:
    readings: list[list[dict]] = json.loads((DATA / name).read_text())
    return readings


def _tally(name: str, database: str) -> tuple[Counter[str], Counter[str]]:
    active: Counter[str] = Counter()
    states: Counter[str] = Counter()
    for rows in _readings(name):
        t = tally_activity(rows, database)
        active.update(t.active)
        states.update(t.states)
    return active, states


def test_pg15_recorded_rows_count_the_benchmarks_sessions_only():
    active, states = _tally("activity-pg15-recorded.json", "postgres")
    # pgbench's sessions; not the psql of another database, nor howfast's own, nor the
    # background processes
    assert active["Lock:transactionid"] == 54 and active["Lock:tuple"] == 9
    assert active["CPU"] == 4 and active["IO:WALSync"] == 4
    assert "Timeout:PgSleep" not in active and "Activity:BgWriterMain" not in active
    assert states["idle in transaction"] == 17 and states["active"] == sum(active.values())
    profile = why.wait_profile(
        {"wait_sampling": {"counts": dict(active), "states": dict(states), "readings": 12}}
    )
    assert profile is not None
    assert profile.events[0][:2] == ("Lock", "transactionid")
    assert profile.types["Lock"] > 0.7


def test_pg14_commit_path():
    active, states = _tally("activity-pg14-constructed.json", "bench")
    assert active == Counter({"IO:WALSync": 4, "CPU": 1, "LWLock:WALWrite": 1})
    assert states == Counter({"active": 6, "idle in transaction": 2})
    profile = why.wait_profile({"wait_sampling": {"counts": dict(active)}})
    assert profile is not None and profile.share(why.COMMIT_EVENTS) == pytest.approx(5 / 6)


def test_pg16_data_reads_and_howfasts_sessions_left_out():
    active, _ = _tally("activity-pg16-constructed.json", "bench")
    assert active == Counter({"IO:DataFileRead": 18, "CPU": 6})


def test_pg17_only_client_backends():
    active, states = _tally("activity-pg17-constructed.json", "bench")
    assert active == Counter({"CPU": 7})  # the parallel and autovacuum workers are left out
    assert states == Counter({"active": 7, "idle in transaction": 3})


def test_per_second_series_are_raw_counts():
    seconds = {1: Second(10, Counter({"IO": 7, "CPU": 3})), 2: Second(9, Counter({"CPU": 4}))}
    series = per_second_series(seconds)
    assert [p.value for p in series["waits.samples"]] == [10, 9]
    assert [p.value for p in series["waits.IO"]] == [7, 0]
    assert [p.t for p in series["waits.CPU"]] == [1.0, 2.0]


def test_pg_wait_sampling_profile_increments():
    added, now = profile_increments({}, [(1, "IO", "WALSync", 5), (1, None, None, 3)])
    assert added == Counter({"IO:WALSync": 5, "CPU": 3})
    added, _ = profile_increments(
        now, [(1, "IO", "WALSync", 9), (2, "Lock", "tuple", 2), (2, "Client", "ClientRead", 50)]
    )
    assert added == Counter({"IO:WALSync": 4, "Lock:tuple": 2})  # idle Client waits left out


def test_cgroup_counters_parse():
    v2 = parse_io_stat("7:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n8:0 rbytes=1")
    assert v2["7:0"] == {"read_bytes": 4096, "write_bytes": 8192, "read_ios": 1, "write_ios": 2}
    assert v2["8:0"]["read_bytes"] == 1
    v1 = parse_blkio_v1(
        "7:0 Read 5120\n7:0 Write 8192000\n7:0 Sync 8197120\n7:0 Total 8197120\nTotal 8197120\n",
        "7:0 Read 5\n7:0 Write 8\n7:0 Total 13\nTotal 13\n",
    )
    assert v1 == {
        "7:0": {"read_bytes": 5120, "write_bytes": 8192000, "read_ios": 5, "write_ios": 8}
    }
    proc = parse_proc_io("rchar: 10\nwchar: 20\nread_bytes: 4096\nwrite_bytes: 8192\n")
    assert proc["write_bytes"] == 8192


def test_process_io_keeps_what_exited_children_did():
    io = ProcessIo(postmaster=1)
    io.update({1: {"write_bytes": 100}, 2: {"write_bytes": 50}}, first=True)
    io.update({1: {"write_bytes": 100}, 2: {"write_bytes": 80}, 3: {"write_bytes": 10}})
    assert io.totals()["write_bytes"] == 40
    # 2 and 3 exit; the postmaster reaps them and gains their whole counts (80 + 25)
    io.update({1: {"write_bytes": 205}})
    assert io.totals()["write_bytes"] == 205 - 100 - 50  # = 30 + 25


def _profile(**shares: float) -> why.Profile:
    counts = {k.replace("__", ":"): int(v * 1000) for k, v in shares.items()}
    profile = why.wait_profile({"wait_sampling": {"counts": counts, "readings": 100}})
    assert profile is not None
    return profile


def test_commit_latency_with_the_ceiling():
    f = why.StepFacts(
        mode="tpcb-like",
        clients=1,
        tps=1128,
        profile=_profile(IO__WALSync=0.62, CPU=0.3, Client__ClientRead=0.08),
        ceiling_tps=1240,
    )
    v = why.decide(f)
    assert v.verdict == "storage latency"
    assert "62% of active time in the commit path" in v.reason
    assert "1,128 TPS per client = 91% of the 1,240 commits/s" in v.reason


def test_flushes_off_is_never_storage_latency():
    f = why.StepFacts(clients=1, profile=_profile(IO__WALSync=0.62, CPU=0.38))
    f.flushes_off = "fsync=off"
    assert why.decide(f).verdict != "storage latency"


def test_lock_contention_names_scale_and_clients():
    f = why.StepFacts(
        mode="tpcb-like",
        clients=8,
        scale=1,
        profile=_profile(Lock__transactionid=0.75, Lock__tuple=0.08, IO__WALSync=0.1, CPU=0.07),
    )
    v = why.decide(f)
    assert v.verdict == "lock contention" and "scale 1 < clients 8" in v.reason


def test_load_generator_first():
    f = why.StepFacts(profile=_profile(CPU=0.9), pgbench_thread_pct=97, machine_busy_pct=99)
    assert why.decide(f).verdict == "load generator"


def test_server_cpu_needs_busy_cores():
    f = why.StepFacts(profile=_profile(CPU=0.9, IO__WALSync=0.1), machine_busy_pct=95)
    assert why.decide(f).verdict == "server CPU"
    f.machine_busy_pct = 40
    assert why.decide(f).verdict == "unclear"


def test_idle_sessions_wait_for_the_load_generator():
    profile = why.wait_profile(
        {"wait_sampling": {"counts": {"CPU": 40}, "states": {"active": 40, "idle": 60}}}
    )
    v = why.decide(why.StepFacts(profile=profile, machine_busy_pct=50))
    assert v.verdict == "load generator" and "60%" in v.reason


def test_storage_throughput_from_reads_and_from_a_saturated_device():
    f = why.StepFacts(profile=_profile(IO__DataFileRead=0.7, CPU=0.3))
    assert why.decide(f).verdict == "storage throughput"
    legacy = why.StepFacts(device={"data": {"util_pct": 99.0, "queue_depth": 12.0}})
    assert why.decide(legacy).verdict == "storage throughput"


def test_too_few_samples_is_unclear():
    profile = why.wait_profile({"wait_sampling": {"counts": {"IO:WALSync": 5}}})
    v = why.decide(why.StepFacts(profile=profile, machine_busy_pct=99))
    assert v.verdict == "unclear" and "too few" in v.reason


def test_derived_step_has_prometheus_shape_and_own_io_warning():
    step = StepRecord(
        target="t",
        workload="pgbench",
        params={"mode": "tpcb-like", "clients": 1, "duration_s": 10},
        status="completed",
        started_at="2026-01-01T00:00:00Z",
        finished_at="2026-01-01T00:00:10Z",
        metrics={"tps": 500.0},
        sections={
            "postgres": {
                "wal_bytes": 4 << 20,
                "wait_sampling": {"counts": {"IO:WALSync": 60, "CPU": 40}, "readings": 100},
            },
            "io": {
                "roles": {
                    "data": {
                        "device": "loop0",
                        "seconds": 10,
                        "delta": {"write_ios": 20000, "sectors_written": 800000},
                    }
                },
                "postgres": {
                    "source": "cgroup v1 + /proc/PID/io",
                    "seconds": 10.0,
                    "proc": {"read_bytes": 0, "write_bytes": 99 << 20},
                    "cgroup_total": {"read_bytes": 0, "write_bytes": 12 << 20},
                    "roles": {"data": {"write_bytes": 12 << 20, "write_ios": 3000}},
                },
            },
        },
    )
    out = derive_step(step, [])
    events = out.sections["postgres"]["wait_events"]
    assert events[0] == {
        "wait_event_type": "IO",
        "wait_event": "WALSync",
        "share": 0.6,
        "samples": 60,
    }
    assert out.metrics["pg_write_bytes"] == 12 << 20  # the cgroup's, not /proc's page counts
    assert out.metrics["pg_io_data_write_iops"] == 300.0
    assert out.metrics["pg_write_amplification"] == 3.0
    assert any("something else used the disk" in w for w in out.warnings)
    assert out.sections["why"]["verdict"] == "storage latency"
    assert ("IO", "WALSync", 0.6) in wait_event_shares(out)  # what the Prometheus export reads


def test_a_busy_shared_disk_is_not_a_verdict_on_a_test_that_did_no_io():
    """Device IOPS above the probe's maximum, but PostgreSQL's own I/O was nil: the disk
    was busy with someone else's work; and only a throughput profile counts as the maximum
    (wal-fsync's rate is one commit at a time)."""
    from howfast.analysis.why import decide, step_facts
    from howfast.model import StepRecord

    def fio(profile: str, iops: float, flushes: bool) -> StepRecord:
        return StepRecord("t", "fio", {"profile": profile}, "completed", "a", "b",
                          metrics={"write_iops": iops},
                          resolved={"flushes_every_write": flushes})  # fmt: skip

    metrics = {"tps": 7000.0, "io_data_read_iops": 2300.0, "io_data_write_iops": 10.0,
               "pg_io_data_read_iops": 0.0, "pg_io_data_write_iops": 0.0}  # fmt: skip
    step = StepRecord("t", "pgbench", {"mode": "select-only", "clients": 1}, "completed",
                      "a", "b", metrics=metrics)  # fmt: skip
    facts = step_facts(step, [fio("wal-fsync", 1900.0, True)])
    assert facts.probe_max_iops is None  # wal-fsync is no throughput maximum
    facts = step_facts(step, [fio("rand-read-4k-qd64", 2000.0, False)])
    assert facts.probe_max_iops == 2000.0
    assert decide(facts).verdict != "storage throughput"
    # The same device figures without the server's own: judged on the device, as before.
    legacy = {k: v for k, v in metrics.items() if not k.startswith("pg_")}
    old = StepRecord("t", "pgbench", {"mode": "select-only", "clients": 1}, "completed",
                     "a", "b", metrics=legacy)  # fmt: skip
    assert "2,310" in decide(step_facts(old, [fio("rand-read-4k-qd64", 2000.0, False)])).reason


def test_network_verdict_when_round_trips_take_half_a_transaction():
    # 7 round trips x 0.40 ms = 2.8 ms of 3.7 ms: the network rule holds and nothing else does
    step = StepRecord(
        target="/data/a",
        workload="pgbench",
        status="completed",
        started_at="2026-11-25T23:00:00Z",
        finished_at="2026-11-25T23:00:10Z",
        params={"mode": "tpcb-like", "clients": 1},
        metrics={"tps": 270.0, "latency_avg_ms": 3.7, "client_rtt_p50_ms": 0.40},
    )
    facts = why.step_facts(step, [])
    verdict = why.decide(facts)
    assert verdict.verdict == "network"
    assert verdict.reason == (
        "7 round trips x 0.40 ms = 2.8 ms of the 3.7 ms a transaction takes: "
        "the network sets the pace"
    )
    assert verdict.evidence == {"client_rtt_p50_ms": 0.40}


def test_no_network_verdict_when_round_trips_are_a_small_share():
    step = StepRecord(
        target="/data/a",
        workload="pgbench",
        status="completed",
        started_at="2026-11-25T23:00:00Z",
        finished_at="2026-11-25T23:00:10Z",
        params={"mode": "tpcb-like", "clients": 1},
        metrics={"tps": 270.0, "latency_avg_ms": 3.7, "client_rtt_p50_ms": 0.03},
    )
    assert why.decide(why.step_facts(step, [])).verdict != "network"
