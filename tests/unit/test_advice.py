"""Advice (analysis/advice.py, docs/why.md "Advice"): each rule and its boundary on facts built
directly, then from a stored run read back, where every piece must carry its evidence."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from howfast.analysis.advice import (
    Advice,
    AdviceFacts,
    CommitWait,
    Dip,
    WalCheckpoints,
    advise,
    round_up_mb,
    seconds,
    size_mb,
)
from howfast.model import JSONValue, Sample, StepRecord, TargetRecord
from howfast.service.reading import read_run, run_document
from tests.unit.stored_runs import ENVIRONMENT, STARTED, fio, open_temp_store, pgbench

SETTINGS = {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on",
            "wal_sync_method": "fdatasync", "max_wal_size": "1GB",
            "checkpoint_timeout": "5min", "checkpoint_completion_target": "0.5"}  # fmt: skip


def facts(**kw: object) -> AdviceFacts:
    base: dict[str, object] = {
        "target": "/mnt/a",
        "kind": "local",
        "settings": dict(SETTINGS),
        "platform": "linux",
        "durability": "durable",
        "durability_rule": "safe settings",
        "least_flush_ms": 0.1,
    }
    base.update(kw)
    return AdviceFacts(**base)  # type: ignore[arg-type]


def settings_of(found: list[Advice]) -> list[str]:
    return [a.setting for a in found]


# -- wal_sync_method ---------------------------------------------------------------------------


@pytest.mark.parametrize(("open_sync_us", "advised"), [(500.0, True), (501.0, False)])
def test_the_fastest_flushing_method_when_the_one_in_use_takes_20_percent_longer(
    open_sync_us, advised
):
    methods = {"fdatasync": 600.0, "fsync": 700.0, "open_sync": open_sync_us}
    found = advise(facts(methods_us=methods, method_runs=[methods]))
    if not advised:
        assert found == []
        return
    (advice,) = found
    assert (advice.setting, advice.value, advice.current) == (
        "wal_sync_method", "open_sync", "fdatasync")  # fmt: skip
    assert advice.try_it == "--set wal_sync_method=open_sync" and advice.note is None
    assert advice.evidence["pg_test_fsync_usecs"] == methods
    assert "17% less time" in advice.reason and "wal_sync_method" in advice.source


def test_a_method_faster_than_the_medium_allows_is_never_advised():
    methods = {"fdatasync": 6000.0, "open_datasync": 300.0, "open_sync": 4000.0}
    (advice,) = advise(facts(methods_us=methods, least_flush_ms=1.0))  # a rotating disk
    assert advice.value == "open_sync"
    assert "open_datasync left out: faster than the medium allows" in advice.reason


def test_a_gain_that_does_not_hold_in_every_run_is_noise():
    runs = [{"fdatasync": 900.0, "open_sync": 400.0}, {"fdatasync": 500.0, "open_sync": 480.0}]
    means = {"fdatasync": 700.0, "open_sync": 440.0}
    assert advise(facts(methods_us=means, method_runs=runs)) == []


@pytest.mark.parametrize("verdict", ["not durable", "in doubt", "unknown"])
def test_no_method_is_advised_unless_the_flushes_are_known_durable(verdict):
    methods = {"fdatasync": 900.0, "open_sync": 400.0}
    assert advise(facts(methods_us=methods, durability=verdict)) == []


def test_advice_on_a_server_that_is_not_ours_says_howfast_cannot_try_it():
    methods = {"fdatasync": 900.0, "open_sync": 400.0}
    (advice,) = advise(facts(methods_us=methods, kind="dsn"))
    assert advice.try_it is None and "administrator" in str(advice.note)
    (probe,) = advise(facts(methods_us=methods, kind="path"))
    assert probe.try_it is None and "the server that will use this storage" in str(probe.note)


# -- commit_delay and commit_siblings -----------------------------------------------------------


def wait(share: float, clients: int = 8, flushes_on: bool = True) -> CommitWait:
    return CommitWait(f"tpcb-like at {clients} clients", clients, share, flushes_on)


def test_commit_delay_is_half_a_flush_when_clients_wait_on_wal_flushes():
    methods = {"fdatasync": 700.0}
    (delay,) = advise(facts(methods_us=methods, commit_waits=[wait(0.30)]))
    assert (delay.setting, delay.value, delay.current) == ("commit_delay", "350", "0")
    assert delay.evidence["flush_source"] == "pg_test_fsync fdatasync"
    assert "30% of active time waiting on WAL flushes" in delay.reason
    assert "WAL Configuration" in delay.source
    assert advise(facts(methods_us=methods, commit_waits=[wait(0.29)])) == []


def test_commit_delay_needs_several_clients_and_flushes():
    methods = {"fdatasync": 700.0}
    assert advise(facts(methods_us=methods, commit_waits=[wait(0.9, clients=3)])) == []
    assert advise(facts(methods_us=methods, commit_waits=[wait(0.9, flushes_on=False)])) == []
    fsync_off = facts(methods_us=methods, commit_waits=[wait(0.9)], durability_rule="fsync=off")
    assert advise(fsync_off) == []
    assert advise(facts(commit_waits=[wait(0.9)])) == []  # no flush time measured


def test_commit_siblings_when_fewer_clients_than_the_default_could_trigger_the_delay():
    found = advise(facts(fio_flush_ms=0.8, commit_waits=[wait(0.6, clients=4)]))
    delay, siblings = found
    assert delay.value == "400" and delay.evidence["flush_source"].startswith("fio wal-fsync")
    assert (siblings.setting, siblings.value, siblings.current) == ("commit_siblings", "3", "5")
    assert "at most 3" in siblings.reason
    at_six = advise(facts(fio_flush_ms=0.8, commit_waits=[wait(0.6, clients=6)]))
    assert settings_of(at_six) == ["commit_delay"]


# -- max_wal_size ---------------------------------------------------------------------------------


def test_a_larger_max_wal_size_when_wal_volume_started_checkpoints():
    # 60 MB of WAL in 10 s = 6 MiB/s-ish; over 300 s with target 0.5: 60e6/10*300*1.5 bytes.
    found = WalCheckpoints("tpcb-like at 8 clients", 2, 60_000_000, 10.0, 300.0, 0.5, 64.0)
    (advice,) = advise(facts(wal_checkpoints=[found]))
    needed = 60_000_000 / 10 * 300 * 1.5 / 2**20
    assert advice.setting == "max_wal_size" and advice.current == "64MB"  # the step's
    assert advice.value == "3GB" and advice.evidence["needed_mb"] == round(needed, 1)
    assert "2 checkpoint(s) started by WAL volume" in advice.reason
    small = WalCheckpoints("x", 1, 1_000_000, 10.0, 300.0, 0.9, 32.0)
    (advice,) = advise(facts(wal_checkpoints=[small]))
    assert advice.value == "64MB"  # at least twice the size that was too small


def test_sizes_and_durations_as_postgresql_writes_them():
    assert size_mb("1GB") == 1024.0 and size_mb("80MB") == 80.0 and size_mb("512") == 512.0
    assert seconds("5min") == 300.0 and seconds("300s") == 300.0 and seconds("30") == 30.0
    assert size_mb("lots") is None and seconds(None) is None
    assert round_up_mb(1025.0) == 2048.0 and round_up_mb(1024.0) == 1024.0
    assert round_up_mb(100.0) == 128.0


# -- checkpoint_completion_target ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("during", "target", "seconds_during", "advised"),
    [(800.0, 0.5, 3, True), (801.0, 0.5, 3, False), (500.0, 0.9, 3, False),
     (500.0, 0.5, 2, False)],
)  # fmt: skip
def test_checkpoint_completion_target_when_tps_dips_at_checkpoints(
    during, target, seconds_during, advised
):
    dip = Dip("tpcb-like at 8 clients", during, 1000.0, seconds_during, 20, target)
    found = advise(facts(dips=[dip]))
    assert settings_of(found) == (["checkpoint_completion_target"] if advised else [])
    if advised:
        assert found[0].value == "0.9" and found[0].current == "0.5"
        assert "20% less" in found[0].reason


# -- from a stored run --------------------------------------------------------------------------


def test_a_stored_run_carries_its_advice_with_evidence(tmp_path: Path):
    metrics: dict[str, JSONValue] = {"fdatasync_usecs": 640.0, "fdatasync_ops_s": 1562.5}
    fsync = StepRecord(
        "/mnt/a", "pg_test_fsync", {"seconds": 2}, "completed", STARTED, STARTED, metrics=metrics
    )
    per_second = [2000.0] * 5 + [1000.0] * 5  # a checkpoint over the last 5 s
    busy = pgbench("/mnt/a", 2000.0, clients=8, per_second=per_second)
    busy.metrics["wait_commit_share"] = 0.55
    busy.params["duration_s"] = 10
    busy = replace(busy, sections={"postgres": {
        "wal_bytes": 80_000_000,
        "settings": {"max_wal_size": "64MB", "checkpoint_completion_target": "0.5",
                     "checkpoint_timeout": "300s"},
        "checkpoints": [{"reason": "wal", "start_t": 5.0, "end_t": 10.0}],
    }})  # fmt: skip
    disk: dict[str, JSONValue] = {"fstype": "ext4", "device": {"name": "sda", "disk": "sda",
                                  "rotational": False, "write_cache": "write back"}}  # fmt: skip
    device: dict[str, JSONValue] = {"data": disk, "wal": disk, "wal_on_data_device": True}
    with open_temp_store(tmp_path) as db:
        run_id = db.create_run("x", ENVIRONMENT, STARTED)
        db.add_target(run_id, TargetRecord("/mnt/a", "local", "16.4", SETTINGS, device))
        for step in (fsync, busy):
            db.add_step(run_id, step)
        run = read_run(db, run_id)
    assert run is not None
    expected = [Sample(float(t), v) for t, v in enumerate(per_second, start=1)]
    assert run.steps[1].series["tps"] == expected  # read back for the derivation
    (target,) = run_document(run)["targets"]
    assert target["durability"]["verdict"] == "durable"
    found = {a["setting"]: a for a in target["advice"]}
    assert list(found) == ["commit_delay", "max_wal_size", "checkpoint_completion_target"]
    assert found["commit_delay"]["value"] == "320"
    assert found["max_wal_size"]["evidence"]["checkpoints_by_wal"] == 1
    assert found["max_wal_size"]["value"] == "4GB"  # 8 MB/s x 300 s x 1.5 = 3.4 GiB
    dip = found["checkpoint_completion_target"]["evidence"]["steps"][0]
    assert (dip["seconds_during"], dip["seconds_outside"]) == (5, 5)
    assert (dip["tps_during_checkpoints"], dip["tps_outside_checkpoints"]) == (1000.0, 2000.0)
    for advice in found.values():
        assert advice["evidence"] and advice["source"] and advice["try"].startswith("--set ")


def test_without_pg_test_fsync_the_delay_is_half_the_flush_of_fio_s_wal_fsync_profile(
    tmp_path: Path,
):
    # The flush comes from the workloads' evidence (fio's analysis part): the wal-fsync
    # profile's write + fdatasync, averaged over its runs; another synced job is not it.
    wal = [fio("/mnt/a", "wal-fsync", write_lat_avg_ms=0.2, sync_lat_avg_ms=s) for s in (0.5, 0.7)]
    other = fio("/mnt/a", "rand-write-4k-qd1", write_lat_avg_ms=5.0, sync_lat_avg_ms=5.0)
    other.params["flushes_every_write"] = True
    busy = pgbench("/mnt/a", 2000.0, clients=8)
    busy.metrics["wait_commit_share"] = 0.55
    disk: dict[str, JSONValue] = {"fstype": "ext4", "device": {"name": "sda", "disk": "sda",
                                  "rotational": False, "write_cache": "write back"}}  # fmt: skip
    device: dict[str, JSONValue] = {"data": disk, "wal": disk, "wal_on_data_device": True}
    with open_temp_store(tmp_path) as db:
        run_id = db.create_run("x", ENVIRONMENT, STARTED)
        db.add_target(run_id, TargetRecord("/mnt/a", "local", "16.4", SETTINGS, device))
        for step in (*wal, other, busy):
            db.add_step(run_id, step)
        run = read_run(db, run_id)
    assert run is not None
    (target,) = run_document(run)["targets"]
    delay = next(a for a in target["advice"] if a["setting"] == "commit_delay")
    assert delay["value"] == "400"  # half of 0.2 + 0.6 ms
    assert delay["evidence"]["flush_source"] == "fio wal-fsync (write + fdatasync)"
    assert delay["evidence"]["flush_us"] == 800.0
