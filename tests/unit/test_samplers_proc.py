"""Parsers and per-interval arithmetic of the /proc samplers, on recorded snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from howfast.machine.devices import assign, disk_of
from howfast.model import Sample
from howfast.samplers.cpu import (
    CpuTimes,
    ProcessReading,
    cpu_shares,
    page_cache_bytes,
    parse_meminfo,
    parse_pid_stat,
    parse_stat,
    process_usage,
)
from howfast.samplers.diskstats import (
    Reading,
    counter_delta,
    counters_from_delta,
    parse_diskstats,
    rates,
    role_series,
)

PROC = Path(__file__).parent.parent / "data" / "proc"


def read(name: str) -> str:
    return (PROC / name).read_text()


# --- /proc/diskstats --------------------------------------------------------------------------


def test_diskstats_of_a_recent_kernel_has_flush_counters() -> None:
    devices = parse_diskstats(read("diskstats-recorded-1.txt"))
    assert {"loop0", "loop1", "vda"} <= devices.keys()
    wal = devices["loop1"]
    assert (wal.writes, wal.sectors_written, wal.write_ms) == (47658, 1992454, 21264)
    assert (wal.in_flight, wal.io_ms, wal.weighted_ms) == (1, 18408, 35206)
    assert (wal.flushes, wal.flush_ms) == (24134, 13925)


def test_diskstats_of_an_old_kernel_has_no_flush_counters() -> None:
    devices = parse_diskstats(read("diskstats-constructed-kernel4.txt"))
    assert list(devices) == ["sda", "sda1", "dm-0"]
    assert devices["dm-0"].writes == 649436
    assert devices["dm-0"].in_flight == 2
    assert (devices["sda"].flushes, devices["sda"].flush_ms) == (0, 0)


def test_diskstats_skips_lines_it_cannot_read() -> None:
    text = "garbage\n   8 0 sdb 1 2 3\n   8 0 sdc a b c d e f g h i j k\n"
    assert parse_diskstats(text) == {}


def test_rates_of_the_wal_device_over_one_second() -> None:
    before = parse_diskstats(read("diskstats-recorded-1.txt"))["loop1"]
    after = parse_diskstats(read("diskstats-recorded-2.txt"))["loop1"]
    r = rates(before, after, 1.0)
    assert r.write_iops == 1056
    assert r.write_bytes == (2015222 - 1992454) * 512 == 11657216
    assert r.write_mbps == pytest.approx(11.657216)
    assert r.avg_write_kib == pytest.approx(11657216 / 1056 / 1024)
    assert r.write_await_ms == pytest.approx(559 / 1056)
    assert r.queue_depth == pytest.approx(0.975)
    assert r.util_pct == pytest.approx(56.4)
    assert r.write_merges_per_s == 4
    assert r.write_merged_ratio == pytest.approx(4 / 1060)
    assert r.flushes_per_s == 531
    # No reads in that second: per-request figures are unknown, not zero.
    assert (r.read_iops, r.avg_read_kib, r.read_await_ms, r.read_merged_ratio) == (
        0,
        None,
        None,
        None,
    )


def test_rates_scale_with_the_interval_and_never_go_negative() -> None:
    before = parse_diskstats(read("diskstats-recorded-1.txt"))["loop0"]
    after = parse_diskstats(read("diskstats-recorded-2.txt"))["loop0"]
    assert rates(before, after, 2.0).write_iops == pytest.approx(469 / 2)
    backwards = rates(after, before, 1.0)  # a device re-created meanwhile
    assert backwards.write_iops == 0 and backwards.write_bytes == 0


def test_util_is_capped_at_100_percent() -> None:
    before = parse_diskstats(read("diskstats-recorded-1.txt"))["vda"]
    after = parse_diskstats(read("diskstats-recorded-2.txt"))["vda"]
    assert rates(before, after, 0.1).util_pct == 100.0


def test_a_stored_delta_gives_the_same_rates_as_the_two_readings() -> None:
    before = parse_diskstats(read("diskstats-recorded-1.txt"))["loop1"]
    after = parse_diskstats(read("diskstats-recorded-2.txt"))["loop1"]
    delta = counter_delta(before, after)
    assert "in_flight" not in delta  # a level, not a counter
    assert rates(*counters_from_delta(delta), 1.0) == rates(before, after, 1.0)


def test_role_series_put_each_interval_at_its_end() -> None:
    first = parse_diskstats(read("diskstats-recorded-1.txt"))["loop1"]
    second = parse_diskstats(read("diskstats-recorded-2.txt"))["loop1"]
    series = role_series([Reading(0.0, first), Reading(1.0, second), Reading(2.0, second)])
    assert series["write_iops"] == [Sample(1.0, 1056.0), Sample(2.0, 0.0)]
    assert series["avg_write_kib"] == [Sample(1.0, pytest.approx(10.7803, abs=1e-4))]
    assert "avg_read_kib" not in series  # never a read: no point at all


# --- /proc/stat, /proc/meminfo, /proc/PID/stat ------------------------------------------------


def test_cpu_shares_between_two_readings() -> None:
    before = parse_stat(read("stat-recorded-1.txt"))
    after = parse_stat(read("stat-recorded-2.txt"))
    assert before == CpuTimes(165710, 0, 66725, 298447, 10936, 0, 6999, 14249)
    shares = cpu_shares(before, after)
    assert shares is not None
    # 198 ticks: user 99, system 68 + softirq 11, idle 5, iowait 6, steal 9
    assert shares["user"] == pytest.approx(50.0)
    assert shares["system"] == pytest.approx(79 / 198 * 100)
    assert shares["iowait"] == pytest.approx(6 / 198 * 100)
    assert shares["steal"] == pytest.approx(9 / 198 * 100)
    assert sum(shares.values()) == pytest.approx(100.0)
    assert cpu_shares(after, after) is None


def test_stat_of_an_old_kernel_without_steal() -> None:
    assert parse_stat("cpu  10 0 5 100 1 0 0\ncpu0 10 0 5 100 1 0 0\n").steal == 0
    with pytest.raises(ValueError):
        parse_stat("intr 1 2 3\n")


def test_meminfo_in_bytes_and_page_cache_without_shared_memory() -> None:
    info = parse_meminfo(read("meminfo-recorded.txt"))
    assert info["Cached"] == 1789076 * 1024
    assert info["Dirty"] == 7728 * 1024
    assert page_cache_bytes(info) == (1789076 - 239340) * 1024
    assert page_cache_bytes({}) is None
    assert parse_meminfo("HugePages_Total:       0\n") == {"HugePages_Total": 0}


def test_pid_stat_counts_fields_after_the_command_name() -> None:
    assert parse_pid_stat(read("pid-stat-pgbench-recorded-1.txt")) == 17 + 17
    assert parse_pid_stat(read("pid-stat-pgbench-recorded-2.txt")) == 21 + 21
    # A command name with spaces and parentheses must not shift the fields.
    tricky = "42 (my (odd) tool) R 1 42 42 0 -1 0 0 0 0 0 250 50 0 0 20 0 1 0"
    assert parse_pid_stat(tricky) == 300


def test_process_usage_is_in_percent_of_one_core_with_the_busiest_thread() -> None:
    readings = [
        ProcessReading(0.0, 100, {1: 60, 2: 40}),
        ProcessReading(2.0, 400, {1: 250, 2: 150}),  # 300 ticks in 2 s at 100 ticks/s
    ]
    usage = process_usage(readings, ticks_per_s=100)
    assert usage["cpu_pct"] == pytest.approx(150.0)
    assert usage["busiest_thread_pct"] == pytest.approx(95.0)
    # A thread that appeared after the first reading counts from zero.
    later = [readings[0], ProcessReading(2.0, 400, {1: 80, 2: 50, 3: 190})]
    assert process_usage(later, ticks_per_s=100)["busiest_thread_pct"] == pytest.approx(95.0)
    assert process_usage(readings[:1]) == {}


# --- devices behind the roles -----------------------------------------------------------------


def test_loop_devices_are_sampled_as_themselves_with_their_backing_disk() -> None:
    info = {
        "device": {
            "devnum": "7:1",
            "name": "loop1",
            "disk": "loop1",
            "backing_device": {"devnum": "254:0", "name": "vda", "disk": "vda"},
        }
    }
    assert disk_of(info) == ("loop1", "vda")
    partition = {"device": {"devnum": "259:2", "name": "nvme0n1p2", "disk": "nvme0n1"}}
    assert disk_of(partition) == ("nvme0n1", None)
    assert disk_of({"device": {"devnum": "0:27", "name": None}}) == (None, None)


def test_one_device_serving_both_roles_is_sampled_once() -> None:
    roles = assign(
        [
            ("data", "/d/data", "nvme0n1", "ext4", None),
            ("wal", "/d/data/pg_wal", "nvme0n1", "ext4", None),
        ]
    )
    assert [(r.role, r.device, r.shares_with) for r in roles] == [
        ("data", "nvme0n1", None),
        ("wal", "nvme0n1", "data"),
    ]
    assert roles[1].describe()["same_device_as"] == "data"
    apart = assign([("data", "/a", "loop0", "ext4", "vda"), ("wal", "/b", "loop1", "ext4", "vda")])
    assert [r.shares_with for r in apart] == [None, None]
    assert apart[0].describe()["backing_device"] == "vda"
    tmpfs = assign([("data", "/dev/shm/x", None, "tmpfs", None)])[0].describe()
    assert tmpfs["device"] is None and "tmpfs" in str(tmpfs["note"])
