"""A server in a pod made again under the same name (CloudNativePG's failover remakes the
deleted primary as `pg-1` again; `delete-pod` remakes a k8s:// server's pod) is another
server: its counters start again, and comparing them with the old pod's gave 0 bytes (a
clamped negative delta: seen on the lab, `wal_written("pg-1") == 0`). Readings carry the
server's identity (postmaster PID and start time), and no figure spans two servers."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from howfast.hosts.base import ServerCounters
from howfast.hosts.local import LocalHost
from howfast.machine.devices import RoleDevice
from howfast.machine.podread import parse_server, server_argv
from howfast.samplers.base import SamplerContext
from howfast.samplers.container_io import ContainerServerSampler, ServerReplaced
from howfast.samplers.instances import InstancesSampler
from howfast.targets.capabilities import InstanceView
from tests.unit.test_pod_samplers import PROC_IO, RecordedCounters, server_output
from tests.unit.test_samplers_session import FakeTarget


def output(
    server: str | None, written: int, usage_ns: int, pm_written: int, init: str | None = None
) -> str:
    """One reading of a v1 container: `written` bytes on 254:0, the postmaster (PID 41,
    `server` its postmaster.pid start time; None: no postmaster.pid) having written
    `pm_written`; `init` the start time of the container's PID 1 (None: not printed, as by
    the script of earlier versions)."""
    io_bytes = f"254:0 Read 0\n254:0 Write {written}\nTotal {written}"
    io_ios = f"254:0 Read 0\n254:0 Write {written // 4096}\nTotal {written // 4096}"
    cpu_stat = "nr_periods 10\nnr_throttled 0\nthrottled_time 0"
    procs = f"\x1dinit {init}\n" if init is not None else ""
    if server is not None:
        procs += f"\x1d41 {server}\n" + PROC_IO.format(r=0, w=pm_written)
    return server_output(io_bytes, io_ios, str(usage_ns), cpu_stat, procs)


def context() -> SamplerContext:
    return SamplerContext(FakeTarget(), None, interval_s=10.0)


# The old pod wrote 80 KiB during the step; the new one (same PID 41 in its own namespace,
# a later start) 8 KiB from its own counters, which start low again.
OLD_THEN_NEW = [
    output("1700000000", 4096, 1_000_000_000, 0),
    output("1700000000", 4096 + 81920, 1_500_000_000, 40960),
    output("1700000100", 8192, 100_000_000, 0),
    output("1700000100", 8192 + 8192, 300_000_000, 8192),
]


def test_the_identity_is_read_from_postmaster_pid(tmp_path: Path) -> None:
    """The script, run by this machine's /bin/sh on a data directory whose postmaster.pid
    names this test's own process: the identity is PID@START (its third line)."""
    import os

    (tmp_path / "postmaster.pid").write_text(f"{os.getpid()}\n{tmp_path}\n1700000042\n5432\n")
    out = subprocess.run(server_argv({}, str(tmp_path)), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    reading = parse_server("v2", {}, out.stdout)
    assert reading.server == f"{os.getpid()}@1700000042"
    assert reading.postmaster == os.getpid()
    assert os.getpid() in reading.processes
    # and the container's: its PID 1's start time (here this machine's init, field 22)
    init_start = Path("/proc/1/stat").read_text().rsplit(") ", 1)[1].split()[19]
    assert reading.container == init_start
    (tmp_path / "postmaster.pid").unlink()  # no server (yet): the container is still read
    out = subprocess.run(server_argv({}, str(tmp_path)), capture_output=True, text=True)
    bare = parse_server("v2", {}, out.stdout)
    assert (bare.server, bare.postmaster, bare.container) == (None, None, init_start)


# A CloudNativePG primary deleted mid-step (seen on the lab, its instance's WAL read as 0):
# the pod made again under its name is read while its server has not started, its data
# volume still holding the old server's postmaster.pid (the same PID@START). Only the
# container's PID 1 tells the two apart. 80 KiB written before, 8 KiB after.
STALE_PID_FILE = [
    output("1700000000", 4096, 1_000_000_000, 0, init="500"),
    output("1700000000", 4096 + 81920, 1_500_000_000, 40960, init="500"),
    output("1700000000", 0, 10_000_000, 0, init="900"),  # new container, old postmaster.pid
    output("1700000100", 8192, 100_000_000, 0, init="900"),
    output("1700000100", 8192 + 8192, 300_000_000, 8192, init="900"),
]


def test_another_container_is_another_server_whatever_postmaster_pid_says() -> None:
    sampler = ContainerServerSampler(RecordedCounters(list(STALE_PID_FILE)), {"data": "vda"})
    sampler.begin(context())
    for t in (1.0, 2.0, 3.0, 4.0):
        sampler.tick(t)
    pg = sampler.result().sections["io"]["postgres"]
    assert isinstance(pg, dict)
    # the old container's 80 KiB, then the new one's (first its own idle counters, then
    # its server's 8 KiB): before, all of it read as one server, max(0, 16384 - 86016) = 0
    assert pg["roles"]["data"]["write_bytes"] == 81920 + 8192
    assert pg["servers"] == 3  # the old container's, the new one's stale file, its server


def test_a_new_container_without_its_server_yet_is_a_gap() -> None:
    outputs = [
        output("1700000000", 4096, 1_000_000_000, 0, init="500"),
        output("1700000000", 4096 + 81920, 1_500_000_000, 40960, init="500"),
        output(None, 0, 10_000_000, 0, init="900"),  # no postmaster.pid yet: not recorded
        output("1700000100", 8192, 100_000_000, 0, init="900"),
        output("1700000100", 8192 + 8192, 300_000_000, 8192, init="900"),
    ]
    sampler = ContainerServerSampler(RecordedCounters(outputs), {"data": "vda"})
    sampler.begin(context())
    for t in (1.0, 2.0, 3.0, 4.0):
        sampler.tick(t)
    pg = sampler.result().sections["io"]["postgres"]
    assert isinstance(pg, dict)
    assert pg["roles"]["data"]["write_bytes"] == 81920 + 8192 and pg["servers"] == 2
    assert pg["proc"] == {"read_bytes": 0, "write_bytes": 40960 + 8192}


def test_one_server_sampler_stops_at_another_container() -> None:
    sampler = ContainerServerSampler(
        RecordedCounters(list(STALE_PID_FILE)), {"data": "vda"}, one_server=True
    )
    sampler.begin(context())
    sampler.tick(1.0)
    with pytest.raises(ServerReplaced, match=r"in container 500 before, .* in container 900 now"):
        sampler.tick(2.0)
    pg = sampler.result().sections["io"]["postgres"]
    assert isinstance(pg, dict)
    assert pg["roles"]["data"]["write_bytes"] == 81920


def test_a_new_server_continues_the_figures_without_comparing_across_servers() -> None:
    sampler = ContainerServerSampler(RecordedCounters(list(OLD_THEN_NEW)), {"data": "vda"})
    sampler.begin(context())
    for t in (1.0, 2.0, 3.0):
        sampler.tick(t)
    result = sampler.result()
    pg = result.sections["io"]["postgres"]
    assert isinstance(pg, dict)
    # each server's gain, summed: before, the new pod's counters compared with the old
    # pod's last gave max(0, 16384 - 86016) = 0
    assert pg["roles"] == {"data": {"read_bytes": 0, "write_bytes": 81920 + 8192,
                                    "read_ios": 0, "write_ios": 22}}  # fmt: skip
    assert pg["servers"] == 2
    assert pg["proc"] == {"read_bytes": 0, "write_bytes": 40960 + 8192}
    cpu = result.sections["cpu"]["server_container"]
    assert isinstance(cpu, dict)
    assert cpu["cpu_s"] == pytest.approx(0.5 + 0.2)
    # one point per interval within a server; none for the interval across the two
    assert [p.t for p in result.series["pgio.data.write_mbps"]] == [1.0, 3.0]
    # The first reading is taken at begin(), a moment after the context's start (over 2 ms on
    # a loaded machine): the first interval is that much shorter than a second.
    first_s = 1.0 - sampler.readings[0].t
    rates = [p.value for p in result.series["pgio.data.write_mbps"]]
    assert rates == [pytest.approx(0.08192 / first_s, rel=1e-3), pytest.approx(0.008192, rel=1e-3)]


def test_one_server_sampler_stops_at_another_server() -> None:
    sampler = ContainerServerSampler(
        RecordedCounters(list(OLD_THEN_NEW)), {"data": "vda"}, one_server=True
    )
    sampler.begin(context())
    sampler.tick(1.0)
    with pytest.raises(ServerReplaced, match="1700000000 before, 41@1700000100 now"):
        sampler.tick(2.0)
    pg = sampler.result().sections["io"]["postgres"]
    assert isinstance(pg, dict)
    assert pg["roles"]["data"]["write_bytes"] == 81920
    assert "servers" not in pg


class RecordedPod(LocalHost):
    """An instance's pod as the instances sampler reads it: its counters recorded."""

    def __init__(self, counters: RecordedCounters) -> None:
        super().__init__()
        self.counters = counters

    def server_counters(self) -> ServerCounters | None:
        return self.counters

    def role_devices(self, paths: Mapping[str, Path]) -> list[RoleDevice]:
        return [RoleDevice("data", str(paths["data"]), "vda")]


class OneInstance:
    """A cnpg-like target whose `pg-1` is remade under its name between two readings."""

    def __init__(self) -> None:
        self.old = RecordedPod(RecordedCounters(list(OLD_THEN_NEW[:3])))
        self.new = RecordedPod(RecordedCounters(list(OLD_THEN_NEW[2:])))
        self.listed = 0

    def instance_views(self) -> Sequence[InstanceView]:
        self.listed += 1
        host = self.old if self.listed == 1 else self.new
        return [InstanceView("pg-1", True, host, {"data": Path("/pgdata")})]

    def metrics_text(self, instance: str) -> str | None:
        return None


def test_the_instances_sampler_starts_a_new_reader_on_a_pod_made_again() -> None:
    target = OneInstance()
    sampler = InstancesSampler(target)
    sampler.begin(context())
    for t in (1.0, 2.0, 3.0):
        sampler.tick(t)
    pods = sampler.result().sections["io"]["instances"]["pg-1"]["pods"]
    assert [p["roles"]["data"]["write_bytes"] for p in pods] == [81920, 8192]
    assert target.listed == 2  # the new pod was looked for once its server was another
