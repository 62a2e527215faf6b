"""Durability verdicts (analysis/durability.py, docs/why.md "Durability"): each rule and its
boundary on facts built directly, then the same verdicts from runs written to a store and read
back, including runs recorded before the write cache was, which must read as "unknown"."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from howfast.analysis.derive import derive_run
from howfast.analysis.durability import (
    ROTATIONAL_MIN_FLUSH_MS,
    WRITE_BACK_MIN_FLUSH_MS,
    DurabilityFacts,
    Flush,
    Medium,
    StepSettings,
    decide,
)
from howfast.analysis.durability_facts import judge_run, path_medium, volume_medium
from howfast.model import JSONValue, RunRecord, StepRecord, TargetRecord
from howfast.service.reading import read_run, run_document
from howfast.targets.pgquery import platform_of
from tests.unit.stored_runs import ENVIRONMENT, STARTED, fio, open_temp_store, pgbench

SAFE = {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on",
        "wal_sync_method": "fdatasync"}  # fmt: skip
NVME = Medium("data", "local", "nvme0n1", "ext4", rotational=False, write_cache="write back")
HDD = Medium("data", "local", "sda", "ext4", rotational=True, write_cache="write back")


def facts(*media: Medium, flushes: tuple[Flush, ...] = (), **kw: object) -> DurabilityFacts:
    base: dict[str, object] = {"target": "/mnt/a", "kind": "local", "server": True,
                               "settings": dict(SAFE), "platform": "linux"}  # fmt: skip
    base.update(kw)
    return DurabilityFacts(media=list(media), flushes=list(flushes), **base)  # type: ignore[arg-type]


def probe(ms: float, role: str = "data", source: str = "fio wal-fsync") -> Flush:
    return Flush(source, role, ms)


# -- not durable -------------------------------------------------------------------------------


def test_data_in_memory_is_not_durable_whatever_else_holds():
    tmpfs = Medium("data", "memory", "tmpfs", "tmpfs")
    wal = Medium("wal", "memory", "tmpfs", "tmpfs", shared_with="data")
    got = decide(facts(tmpfs, wal, flushes=(probe(0.004),), settings={**SAFE, "fsync": "off"}))
    assert got.verdict == "not durable" and got.rule == "in memory"
    assert got.consequence == "everything lost"
    assert got.reason.startswith("the data and the WAL are in memory (tmpfs)")
    assert [f.rule for f in got.also] == ["fsync=off"]  # also said, weaker


@pytest.mark.parametrize(
    ("setting", "consequence", "words"),
    [
        ("fsync", "corruption", "can leave the database corrupt"),
        ("full_page_writes", "corruption", "torn page"),
        ("synchronous_commit", "recent commits lost", "no corruption"),
    ],
)
def test_each_unsafe_setting_is_not_durable_with_what_a_crash_costs(setting, consequence, words):
    got = decide(facts(NVME, flushes=(probe(0.8),), settings={**SAFE, setting: "off"}))
    assert got.verdict == "not durable" and got.rule == f"{setting}=off"
    assert got.consequence == consequence and words in got.reason
    assert got.evidence["settings"][setting] == "off"


def test_full_page_writes_off_on_zfs_is_only_in_doubt():
    zfs = Medium("data", "local", "tank/pg", "zfs", rotational=False, write_cache="write back")
    got = decide(facts(zfs, flushes=(probe(0.8),), settings={**SAFE, "full_page_writes": "off"}))
    assert got.verdict == "in doubt" and "ZFS" in got.reason


def test_a_storage_probe_has_no_settings_to_judge():
    got = decide(facts(NVME, flushes=(probe(0.8),), server=False, settings={}, kind="path"))
    assert got.verdict == "durable" and "full_page_writes" not in got.reason
    assert "settings" not in got.evidence
    tmpfs = Medium("data", "memory", "tmpfs", "tmpfs")
    got = decide(facts(tmpfs, server=False, settings={}, kind="path"))
    assert got.verdict == "not durable" and "database" not in got.reason
    assert got.reason.startswith("the directory is in memory (tmpfs)")


# -- in doubt: flushes faster than the medium allows --------------------------------------------


def test_a_rotating_disk_flushing_under_a_millisecond_is_in_doubt():
    below = decide(facts(HDD, flushes=(probe(ROTATIONAL_MIN_FLUSH_MS - 0.01),)))
    assert below.verdict == "in doubt" and below.rule == "rotational disk flushing under 1 ms"
    assert "sda" in below.reason and "990 µs per flush" in below.reason
    at = decide(facts(HDD, flushes=(probe(ROTATIONAL_MIN_FLUSH_MS),)))
    assert at.verdict == "durable" and "1.00 ms per flush" in at.reason


def test_a_whole_transaction_faster_than_the_platter_bounds_the_flush():
    one_client = Flush("tpcb-like at 1 client (pgbench)", "data", 0.6, bound=True)
    got = decide(facts(HDD, flushes=(probe(4.0), one_client)))
    assert got.verdict == "in doubt" and "600 µs per commit" in got.reason
    # ...but a transaction alone never shows that flushes take time.
    assert decide(facts(NVME, flushes=(Flush("pgbench", "data", 5.0, bound=True),))).verdict == (
        "unknown"
    )


def test_a_virtual_disks_rotational_flag_is_not_taken_for_the_medium():
    virtio = Medium("data", "local", "vda", "ext4", rotational=True, write_cache="write back",
                    virtual="a virtio disk")  # fmt: skip
    got = decide(facts(virtio, flushes=(probe(0.5),)))
    assert got.verdict == "durable", got.reason


def test_a_write_back_cache_answering_in_microseconds_is_in_doubt():
    below = decide(facts(NVME, flushes=(probe(WRITE_BACK_MIN_FLUSH_MS - 0.001),)))
    assert below.verdict == "in doubt"
    assert below.rule == "write-back cache flushing in microseconds"
    assert "99 µs per flush" in below.reason and "power-loss protection" in below.reason
    at = decide(facts(NVME, flushes=(probe(WRITE_BACK_MIN_FLUSH_MS),)))
    assert at.verdict == "durable"


def test_write_through_needs_no_timing_and_unknown_cache_needs_one():
    plp = Medium("data", "local", "nvme1n1", "xfs", rotational=False, write_cache="write through")
    got = decide(facts(plp))
    assert got.verdict == "durable" and "write through" in got.reason
    old = Medium("data", "local", "nvme1n1", "xfs", rotational=False)  # before write_cache
    got = decide(facts(old))
    assert got.verdict == "unknown" and "write cache: not recorded" in got.reason
    assert "no flush was timed" in got.reason
    assert got.evidence["media"][0]["write_cache"] == "unknown"
    quick = decide(facts(old, flushes=(probe(0.02),)))
    assert quick.verdict == "unknown" and "too quick to show" in quick.reason


def test_an_emulated_volumes_added_delay_proves_nothing():
    emulated = Medium("data", "emulated", "howfast's emulated volume (loop0)", "ext4",
                      virtual="howfast's emulated volume")  # fmt: skip
    got = decide(facts(emulated, flushes=(probe(2.5),)))
    assert got.verdict == "unknown" and "adds its own delay to every flush" in got.reason


def test_a_separate_wal_device_needs_its_own_evidence():
    wal = Medium("wal", "local", "sdb", "ext4", rotational=False, write_cache="write back")
    got = decide(facts(NVME, wal, flushes=(probe(0.8),)))
    assert got.verdict == "unknown" and "wal device (sdb" in got.reason
    wal_shared = Medium("wal", "local", "nvme0n1", "ext4", write_cache="write back",
                        shared_with="data")  # fmt: skip
    assert decide(facts(NVME, wal_shared, flushes=(probe(0.8),))).verdict == "durable"


# -- in doubt: a network volume faster than the local disk of the same run ---------------------


def k8s_target(name: str, provisioner: str) -> TargetRecord:
    volume = {"kind": f"StorageClass {name}", "storage_class": {"name": name,
              "provisioner": provisioner}, "fstype": "ext4"}  # fmt: skip
    device: dict[str, JSONValue] = {"data": volume, "wal": dict(volume),
                                    "wal_on_data_device": True,
                                    "kubernetes": {"node": {"kernel": "6.1.0"}}}  # fmt: skip
    return TargetRecord(f"k8s://{name}", "k8s", "16.4", dict(SAFE), device)


def wal_probe(target: str, ms: float) -> StepRecord:
    step = fio(target, "wal-fsync", write_lat_avg_ms=0.0, sync_lat_avg_ms=ms)
    return replace(step, resolved={"flushes_every_write": True})


@pytest.mark.parametrize(("network_ms", "verdict"), [(1.79, "in doubt"), (1.8, "durable")])
def test_a_replicated_volume_flushing_faster_than_local_disk_is_in_doubt(network_ms, verdict):
    run = RunRecord(1, "x", "completed", STARTED, STARTED, ENVIRONMENT,
                    [k8s_target("local-path", "rancher.io/local-path"),
                     k8s_target("longhorn", "driver.longhorn.io")],
                    [wal_probe("k8s://local-path", 2.0),
                     wal_probe("k8s://longhorn", network_ms)])  # fmt: skip
    got = judge_run(run)
    assert got["k8s://local-path"].verdict == "durable"
    longhorn = got["k8s://longhorn"]
    assert longhorn.verdict == verdict, longhorn.reason
    if verdict == "in doubt":
        assert longhorn.rule == "network volume faster than local disk"
        assert "k8s://local-path: 2.00 ms" in longhorn.reason and "kbench" in longhorn.reason
        assert longhorn.evidence["local_flushes"]["fio wal-fsync"]["ms"] == 2.0


def test_volumes_are_told_apart_by_what_the_record_says():
    assert volume_medium("data", {"kind": "emptyDir in memory", "medium": "Memory"}).kind == (
        "memory"
    )
    assert volume_medium("data", {"medium": "disk"}).kind == "local"
    assert volume_medium("data", {"fstype": "tmpfs", "storage_class": {}}).kind == "memory"
    openebs = {"storage_class": {"provisioner": "openebs.io/local"}}
    assert volume_medium("data", openebs).kind == "local"
    rbd = {"storage_class": {"provisioner": "rook-ceph.rbd.csi.ceph.com"}}
    assert volume_medium("data", rbd).kind == "network"
    unknown = volume_medium("data", {"storage_class": {"provisioner": "example.com/x"}})
    assert unknown.kind == "unknown" and "example.com/x" in unknown.what
    nfs = {"fstype": "nfs4", "source": "srv:/export", "device": {"name": None}}
    assert path_medium("data", nfs, emulated=False).kind == "network"
    zram = {"fstype": "ext4", "device": {"name": "zram0", "disk": "zram0"}}
    assert path_medium("data", zram, emulated=False).kind == "memory"
    # A loop device is judged by the disk under its backing file, or the file's filesystem.
    hdd = {"name": "sda2", "disk": "sda", "rotational": True, "write_cache": "write back",
           "model": "ST4000DM004"}  # fmt: skip
    loop: dict[str, JSONValue] = {"name": "loop3", "disk": "loop3", "rotational": False,
                                  "loop_backing_file": "/srv/img", "backing_device": hdd,
                                  "backing_fstype": "ext4"}  # fmt: skip
    on_loop = path_medium("data", {"fstype": "ext4", "device": loop}, emulated=False)
    assert (on_loop.kind, on_loop.what, on_loop.rotational, on_loop.virtual) == (
        "local", "loop3 on sda", True, None)  # fmt: skip
    in_shm = {**loop, "backing_fstype": "tmpfs", "backing_device": {"name": None}}
    assert path_medium("data", {"device": in_shm}, emulated=False).kind == "memory"
    unseen = {**loop, "backing_fstype": None, "backing_device": {"name": None}}
    assert path_medium("data", {"device": unseen}, emulated=False).kind == "unknown"


# -- the platform and wal_sync_method ------------------------------------------------------------


@pytest.mark.parametrize(
    ("platform", "method", "verdict"),
    [
        ("linux", "open_datasync", "durable"),
        ("macos", "fsync", "in doubt"),
        ("macos", "fsync_writethrough", "durable"),
        ("windows", "open_datasync", "in doubt"),
        ("windows", "fdatasync", "durable"),
        (None, "fdatasync", "unknown"),
    ],
)
def test_wal_sync_method_must_flush_on_the_servers_platform(platform, method, verdict):
    got = decide(facts(NVME, flushes=(probe(0.8),), platform=platform,
                       settings={**SAFE, "wal_sync_method": method}))  # fmt: skip
    assert got.verdict == verdict, got.reason
    if verdict == "in doubt":
        assert got.rule == "wal_sync_method" and "Reliability" in got.reason
    if platform is None:
        assert "platform is not known" in got.reason


@pytest.mark.parametrize(
    ("version", "platform"),
    [
        ("PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc",
         "x86_64-pc-linux-gnu"),
        ("PostgreSQL 16.1 on aarch64-apple-darwin23.1.0, compiled by Apple clang",
         "aarch64-apple-darwin23.1.0"),
        ("PostgreSQL 16.1, compiled by Visual C++ build 1937, 64-bit", "windows"),
        ("PostgreSQL 16.1", None),
    ],
)  # fmt: skip
def test_the_platform_of_a_version_string(version, platform):
    assert platform_of(version) == platform


# -- unknown, and steps that ran with their own settings ---------------------------------------


def test_what_cannot_be_seen_is_unknown_never_durable():
    note = "an existing server: its storage is out of howfast's sight"
    dsn = decide(facts(kind="dsn", platform="linux", media_note=note))
    assert dsn.verdict == "unknown" and "out of howfast's sight" in dsn.reason
    assert dsn.reason.startswith("fsync, full_page_writes and synchronous_commit on")
    imported = decide(facts(NVME, kind="import", server=False))
    assert imported.verdict == "unknown" and "imported" in imported.reason
    no_settings = decide(facts(NVME, flushes=(probe(0.8),), settings={}))
    assert no_settings.verdict == "unknown" and "were not recorded" in no_settings.reason


def test_a_step_with_its_own_unsafe_settings_is_named_apart():
    step = StepSettings("7", "tpcb-like at 1 client", {**SAFE, "fsync": "off"})
    got = decide(facts(NVME, flushes=(probe(0.8),), steps=[step]))
    assert got.verdict == "durable"
    assert got.steps == [{"step": "7", "label": "tpcb-like at 1 client",
                          "verdict": "not durable", "reason": "fsync=off",
                          "consequence": "corruption"}]  # fmt: skip


# -- from a stored run, read back ----------------------------------------------------------------

DISK: dict[str, JSONValue] = {
    "fstype": "ext4",
    "source": "/dev/nvme0n1p2",
    "device": {"name": "nvme0n1p2", "disk": "nvme0n1", "rotational": False,
               "write_cache": "write back", "driver": "nvme"},
}  # fmt: skip


def store(tmp_path: Path, device: dict[str, JSONValue], settings: dict[str, str],
          steps: list[StepRecord]) -> RunRecord:  # fmt: skip
    with open_temp_store(tmp_path) as db:
        run_id = db.create_run("quick", ENVIRONMENT, STARTED)
        db.add_target(run_id, TargetRecord("/mnt/a", "local", "16.4", settings, device, "/mnt/a"))
        for step in steps:
            db.add_step(run_id, step)
        db.finish_run(run_id, "completed", STARTED)
        run = read_run(db, run_id)
    assert run is not None
    return run


def test_a_stored_run_reads_with_its_verdict_in_the_document(tmp_path: Path):
    one_client = pgbench("/mnt/a", 400.0, clients=1)
    sampled = pgbench("/mnt/a", 900.0, clients=1)
    sampled = replace(
        sampled, sections={"postgres": {"settings": {"fsync": "off", "synchronous_commit": "off"}}}
    )
    run = store(tmp_path, {"data": DISK, "wal": DISK, "wal_on_data_device": True}, dict(SAFE),
                [wal_probe("/mnt/a", 0.7), one_client, sampled])  # fmt: skip
    (target,) = run_document(run)["targets"]
    durability = target["durability"]
    assert durability["verdict"] == "durable"
    took = "nvme0n1, write back cache) took 700 µs per flush (fio wal-fsync)"
    assert took in durability["reason"]
    flushes = {f["source"]: f for f in durability["evidence"]["flushes"]}
    # The step that skipped flushes is not one whose latency bounds a flush.
    assert flushes["tpcb-like at 1 client (pgbench)"]["ms"] == 2.5
    assert flushes["tpcb-like at 1 client (pgbench)"]["upper_bound"] is True
    (step,) = durability["steps"]
    assert step["reason"] == "fsync=off; synchronous_commit=off"
    assert target["advice"] == []


def test_the_terminal_summary_starts_with_durability(tmp_path: Path):
    import io

    from rich.console import Console

    from howfast.report.terminal import run_summary

    unsafe = pgbench("/mnt/a", 900.0, clients=1)
    unsafe = replace(unsafe, sections={"postgres": {"settings": {"fsync": "off"}}})
    run = store(tmp_path, {"data": DISK, "wal": DISK, "wal_on_data_device": True}, dict(SAFE),
                [wal_probe("/mnt/a", 0.7), unsafe])  # fmt: skip
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(run_summary(run))
    text = " ".join(out.getvalue().split())
    assert text.startswith("run 1 (quick): completed Durability [durable] /mnt/a: as far as")
    step = "; but step 2 (tpcb-like at 1 client) ran with fsync=off: not durable"
    assert step in text
    assert text.index("pgbench tpcb-like") > text.index(step)  # the tables come after


def test_a_run_stored_before_the_write_cache_was_recorded_reads_as_unknown(tmp_path: Path):
    old_disk = {**DISK, "device": {"name": "sda1", "disk": "sda", "rotational": False}}
    run = store(tmp_path, {"data": old_disk, "wal": old_disk, "wal_on_data_device": True},
                dict(SAFE), [pgbench("/mnt/a", 400.0, clients=4)])  # fmt: skip
    durability = run.targets[0].derived["durability"]
    assert durability["verdict"] == "unknown"
    assert durability["evidence"]["media"][0]["write_cache"] == "unknown"
    # A derivation leaves the record as stored: nothing derived is written back.
    assert derive_run(replace_targets(run)).targets[0].derived["durability"] == durability


def replace_targets(run: RunRecord) -> RunRecord:
    from dataclasses import replace

    return replace(run, targets=[replace(t, derived={}) for t in run.targets])
