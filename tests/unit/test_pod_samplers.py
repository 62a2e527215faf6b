"""Samplers on a pod: the devices behind its volumes found from its mounts and the node's
/proc/diskstats and sysfs, the exec output of many files at once, the server container's own
cgroup and processes, and the samplers reading through a host, on text recorded in the
Kubernetes lab (tests/data/proc/README.md)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from howfast.errors import HowfastError
from howfast.hosts.base import ServerCounters
from howfast.hosts.local import LocalHost
from howfast.hosts.pod import PROC_SHARE_S, ExecResult, PodDescription, PodHost
from howfast.machine.devices import parse_block_links, roles_from_mounts
from howfast.machine.podread import (
    CGROUP_V1_FILES,
    ContainerCpu,
    ServerReading,
    cgroup_v2_files,
    container_cpu,
    own_cgroup_path,
    parse_devices,
    parse_server,
    split_dump,
)
from howfast.samplers.base import SamplerContext
from howfast.samplers.container_io import ContainerServerSampler, cpu_usage
from howfast.samplers.cpu import CpuSampler
from howfast.samplers.diskstats import DiskSampler, counter_delta, parse_diskstats
from tests.unit.test_samplers_session import FakeTarget

PROC = Path(__file__).parent.parent / "data" / "proc"


def recorded(name: str) -> str:
    return (PROC / name).read_text()


def mark(status: str, path: str, text: str) -> str:
    """What DUMP_SCRIPT prints for one file (its printf format)."""
    return f"\x1e{status} {path}\n{text}\n"


# -- many files in one exec ------------------------------------------------------------------


def test_split_dump_gives_each_file_and_each_error() -> None:
    stat = recorded("stat-recorded-1.txt").rstrip("\n")  # $(cat) drops trailing newlines
    text = (
        mark("ok", "/proc/stat", stat)
        + mark("ok", "/proc/empty", "")
        + mark("err", "/proc/nope", "cat: /proc/nope: No such file or directory")
    )
    texts, errors = split_dump(text)
    assert texts == {"/proc/stat": stat, "/proc/empty": ""}
    assert errors == {"/proc/nope": "cat: /proc/nope: No such file or directory"}


def test_parse_devices_refuses_output_without_mountinfo() -> None:
    text = mark("err", "/proc/self/mountinfo", "Permission denied") + mark(
        "ok", "/proc/diskstats", recorded("pod-diskstats-lab.txt")
    )
    with pytest.raises(OSError, match="mountinfo: Permission denied"):
        parse_devices(text + "\x1f\n")


# -- the devices behind a pod's volumes -------------------------------------------------------


def lab_roles(paths: dict[str, str]) -> list[tuple[str, str | None, str | None, str | None]]:
    text = (
        mark("ok", "/proc/self/mountinfo", recorded("pod-mountinfo-lab.txt"))
        + mark("ok", "/proc/diskstats", recorded("pod-diskstats-lab.txt"))
        + "\x1f\n"
        + recorded("pod-block-links-lab.txt")
    )
    mountinfo, diskstats, links = parse_devices(text)
    roles = roles_from_mounts(paths, mountinfo, diskstats, parse_block_links(links))
    return [(r.role, r.device, r.fstype, r.shares_with) for r in roles]


def test_a_claim_on_the_nodes_disk_is_sampled_as_that_disk() -> None:
    """The lab's lab-disk claim: a bind mount of a directory of the node's ext4 on vda."""
    found = lab_roles({"data": "/howfast/data/pgdata", "wal": "/howfast/data/pgdata/pg_wal"})
    assert found == [("data", "vda", "ext4", None), ("wal", "vda", "ext4", "data")]


def test_a_memory_or_overlay_path_has_no_device_and_says_so() -> None:
    roles = roles_from_mounts(
        {"data": "/dev/shm/pgdata", "wal": "/var/lib/x"},
        recorded("pod-mountinfo-lab.txt"),
        recorded("pod-diskstats-lab.txt"),
        {},
    )
    assert [(r.device, r.fstype) for r in roles] == [(None, "tmpfs"), (None, "overlay")]
    assert roles[0].describe()["note"] == "no block device behind this path (tmpfs)"


NVME_MOUNTINFO = (
    "30 1 259:2 / / rw - ext4 /dev/nvme0n1p2 rw\n"
    "31 30 0:40 /vol /howfast/data rw - btrfs /dev/sdb rw\n"
)
NVME_DISKSTATS = (
    " 259       0 nvme0n1 1 0 8 0 2 0 16 0 0 0 0 0 0 0 0 0 0\n"
    " 259       2 nvme0n1p2 1 0 8 0 2 0 16 0 0 0 0 0 0 0 0 0 0\n"
    "   8      16 sdb 1 0 8 0 2 0 16 0 0 0 0 0 0 0 0 0 0\n"
)
NVME_LINKS = (
    "259:0 0 ../../devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0/nvme0n1\n"
    "259:2 1 ../../devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0/nvme0n1/nvme0n1p2\n"
    "8:16 0 ../../devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sdb\n"
)


def test_a_partition_is_sampled_as_its_disk_and_btrfs_by_its_mount_source() -> None:
    roles = roles_from_mounts(
        {"wal": "/pg_wal", "data": "/howfast/data/pgdata"},
        NVME_MOUNTINFO,
        NVME_DISKSTATS,
        parse_block_links(NVME_LINKS),
    )
    assert [(r.role, r.device) for r in roles] == [("wal", "nvme0n1"), ("data", "sdb")]
    # Without sysfs the partition is sampled as itself, rather than not at all.
    alone = roles_from_mounts({"wal": "/pg_wal"}, NVME_MOUNTINFO, NVME_DISKSTATS, {})
    assert alone[0].device == "nvme0n1p2"


# -- the server container's cgroup -------------------------------------------------------------


def test_own_cgroup_path_on_v1_and_v2() -> None:
    version, path = own_cgroup_path(recorded("pod-cgroup-v1-lab.txt"))
    assert version == "v1" and path.startswith("/kubepods/burstable/podd4abb535")
    assert own_cgroup_path("0::/\n") == ("v2", "/")


def server_output(io_bytes: str, io_ios: str, usage: str, cpu_stat: str, procs: str) -> str:
    texts = [io_bytes, io_ios, usage, cpu_stat]
    return (
        "".join(mark("ok", p, t) for p, t in zip(CGROUP_V1_FILES.values(), texts, strict=True))
        + procs
    )


PROC_IO = (
    "rchar: 9\nwchar: 9\nsyscr: 1\nsyscw: 1\nread_bytes: {r}\nwrite_bytes: {w}\n"
    "cancelled_write_bytes: 0\n"
)


def v1_output(
    read: int, written: int, writes: int, usage_ns: int, throttled: int, pm_w: int
) -> str:
    total = read + written
    io_bytes = (
        f"254:0 Read {read}\n254:0 Write {written}\n254:0 Sync {written}\n"
        f"254:0 Total {total}\nTotal {total}"
    )
    io_ios = f"254:0 Read 3\n254:0 Write {writes}\n254:0 Total {3 + writes}\nTotal {3 + writes}"
    cpu_stat = (
        f"nr_periods 100\nnr_throttled {throttled}\nthrottled_time {throttled * 1000}\n"
        "nr_bursts 0\nburst_time 0"
    )
    procs = (
        "\x1d41\n"
        + PROC_IO.format(r=0, w=pm_w)
        + "\x1d57\n"
        + PROC_IO.format(r=0, w=8192)
        + "\x1d58\n"
    )  # 58 exited between the two reads: no text
    return server_output(io_bytes, io_ios, str(usage_ns), cpu_stat, procs)


def test_parse_server_reads_cgroup_v1_cpu_and_the_processes() -> None:
    reading = parse_server("v1", CGROUP_V1_FILES, v1_output(217088, 4096, 1, 65509514, 2, 12288))
    assert reading.io == {
        "254:0": {"read_bytes": 217088, "write_bytes": 4096, "read_ios": 3, "write_ios": 1}
    }
    assert reading.cpu == ContainerCpu(65509514, 100, 2, 2000)
    assert reading.postmaster == 41
    assert sorted(reading.processes) == [41, 57]
    assert reading.processes[41]["write_bytes"] == 12288


def test_parse_server_says_which_cgroup_file_it_could_not_read() -> None:
    text = mark("err", CGROUP_V1_FILES["io_bytes"], "cat: ...: No such file or directory")
    with pytest.raises(OSError, match=r"blkio\.throttle\.io_service_bytes"):
        parse_server("v1", CGROUP_V1_FILES, text)


def test_container_cpu_on_cgroup_v2() -> None:
    files = cgroup_v2_files("/")
    assert files["cpu_stat"] == "/sys/fs/cgroup/cpu.stat"
    stat = (
        "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n"
        "nr_periods 40\nnr_throttled 10\nthrottled_usec 300000\n"
    )
    assert container_cpu("v2", {"cpu_stat": stat}) == ContainerCpu(
        2_500_000_000, 40, 10, 300_000_000
    )


def test_cpu_usage_between_two_readings() -> None:
    a = ContainerCpu(1_000_000_000, 100, 5, 2_000_000_000)
    b = ContainerCpu(2_500_000_000, 120, 15, 2_500_000_000)
    assert cpu_usage(a, b, 2.0) == {
        "cpu_s": 1.5, "cpu_pct": 75.0, "periods": 20, "throttled_periods": 10,
        "throttled_periods_pct": 50.0, "throttled_s": 0.5,
    }  # fmt: skip
    assert cpu_usage(ContainerCpu(None), b, 2.0) == {}


# -- samplers reading through a host -------------------------------------------------------------


class RecordedNode(LocalHost):
    """A host whose /proc is a recorded node's: each read gives the next recorded file."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def read_proc(self, *names: str) -> dict[str, str]:
        n = 1 + min(self.reads, 1)
        self.reads += 1
        files = {"diskstats": f"diskstats-recorded-{n}.txt", "stat": f"stat-recorded-{n}.txt",
                 "meminfo": "meminfo-recorded.txt"}  # fmt: skip
        return {name: recorded(files[name]) for name in names}

    def proc_source(self, name: str) -> str:
        return f"the node's /proc/{name}, by exec"

    def process_cpu_note(self) -> str | None:
        return "pgbench runs in the pod"


def context() -> SamplerContext:
    return SamplerContext(FakeTarget(), None, interval_s=10.0)  # no tick: begin, then stop


def test_disk_and_cpu_samplers_read_through_the_host_and_say_where() -> None:
    disks = DiskSampler({"data": "loop0"}, host=RecordedNode())
    cpu = CpuSampler(host=RecordedNode())
    for sampler in (disks, cpu):
        sampler.start(context())
    io, cpu_result = disks.stop(), cpu.stop()
    assert io.warnings == [] and cpu_result.warnings == []
    before = parse_diskstats(recorded("diskstats-recorded-1.txt"))["loop0"]
    after = parse_diskstats(recorded("diskstats-recorded-2.txt"))["loop0"]
    assert io.sections["io"]["source"] == "the node's /proc/diskstats, by exec"
    assert io.sections["io"]["roles"]["data"]["delta"] == counter_delta(before, after)  # type: ignore[index,call-overload]
    section = cpu_result.sections["cpu"]
    assert section["source"] == "the node's /proc/stat, by exec"
    assert section["load_generator_note"] == "pgbench runs in the pod"
    assert "load_generator" not in section
    assert isinstance(section["user_pct"], float) and section["user_pct"] > 0


def test_local_host_reads_this_machines_proc() -> None:
    got = LocalHost().read_proc("diskstats", "stat")
    assert set(parse_diskstats(got["diskstats"])) == set(
        parse_diskstats(Path("/proc/diskstats").read_text())
    )
    assert got["stat"].startswith("cpu ")
    assert LocalHost().proc_source("stat") == "/proc/stat"


class RecordedCounters(ServerCounters):
    version = "v1"
    cgroup = "/kubepods/pod1/c1"
    source = "cgroup v1 of the server container, by exec"
    note = "writeback is not charged"

    def __init__(self, outputs: list[str]) -> None:
        self.outputs = outputs

    def read(self) -> ServerReading:
        return parse_server("v1", CGROUP_V1_FILES, self.outputs.pop(0))

    def device_number(self, device: str) -> str | None:
        return {"vda": "254:0"}.get(device)


def test_container_server_sampler_fills_the_same_io_section_as_a_local_server() -> None:
    counters = RecordedCounters(
        [
            v1_output(217088, 4096, 1, 1_000_000_000, 2, 12288),
            v1_output(217088, 4096 + 81920, 21, 1_400_000_000, 6, 12288 + 40960),
        ]
    )
    sampler = ContainerServerSampler(counters, {"data": "vda"})
    sampler.start(context())
    time.sleep(0.2)  # long enough for the stored seconds (3 decimals) to give the rate
    result = sampler.stop()
    assert result.warnings == []
    pg = result.sections["io"]["postgres"]
    assert pg["source"] == counters.source and pg["note"] == counters.note  # type: ignore[index,call-overload]
    assert pg["cgroup_total"] == {
        "read_bytes": 0,
        "write_bytes": 81920,
        "read_ios": 0,
        "write_ios": 20,
    }  # type: ignore[index,call-overload]
    assert pg["roles"] == {"data": pg["cgroup_total"]}  # type: ignore[index,call-overload]
    # Process 57 was there both times; the postmaster wrote 40960 more.
    assert pg["proc"] == {"read_bytes": 0, "write_bytes": 40960}  # type: ignore[index,call-overload]
    server = result.sections["cpu"]["server_container"]
    seconds = server["seconds"]  # type: ignore[index,call-overload]
    assert server["cpu_s"] == 0.4 and server["throttled_periods"] == 4  # type: ignore[index,call-overload]
    assert server["cpu_pct"] == pytest.approx(40.0 / seconds, rel=0.03)  # type: ignore[index,call-overload,operator]
    assert [p.value for p in result.series["pgio.data.write_iops"]] == [
        pytest.approx(20 / seconds, rel=0.01)
    ]


def test_container_server_sampler_without_a_server_says_so() -> None:
    counters = RecordedCounters([server_output("", "", "1", "", "")])
    sampler = ContainerServerSampler(counters, {})
    sampler.start(context())
    result = sampler.stop()
    assert result.warnings == ["sampler serverio could not start: the server is not running"]


# -- PodHost's scripts, run for real by /bin/sh on this machine --------------------------------


class ShellHere:
    """Runs what PodHost would exec in a container with /bin/sh here instead: the scripts and
    their quoting are the real ones; only the API server's exec is left out."""

    def __init__(self) -> None:
        self.execs: list[list[str]] = []

    def exec(
        self, namespace: str, pod: str, container: str, command: list[str], *, timeout_s: float
    ) -> ExecResult:
        self.execs.append(command)
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        return ExecResult(done.returncode, done.stdout, done.stderr)


# A pod as howfast's manifests make it (its containers and mounts), on an unknown node.
POD = PodDescription(
    context=None,
    namespace="ns",
    pod="howfast-t0",
    tools_container="tools",
    server_container="postgres",
    data_dir="/howfast/data/pgdata",
    work_dir="/howfast/work",
    volume_root="/howfast",
    path_setup=":",
)


def pod_host() -> tuple[PodHost, ShellHere]:
    shell = ShellHere()
    return PodHost(POD, shell), shell  # type: ignore[arg-type]


def test_pod_host_finds_the_same_device_as_the_local_host(tmp_path: Path) -> None:
    host, _ = pod_host()
    here = LocalHost().role_devices({"data": tmp_path})
    there = host.role_devices({"data": tmp_path})
    assert [(r.device, r.fstype) for r in there] == [(r.device, r.fstype) for r in here]


def test_samplers_ticking_together_share_one_exec_and_sectors_read_anew() -> None:
    host, shell = pod_host()
    first = host.read_proc("diskstats")
    both = host.read_proc("stat", "meminfo")  # within PROC_SHARE_S: the same exec
    assert len(shell.execs) == 1
    assert set(parse_diskstats(first["diskstats"])) == set(
        parse_diskstats(Path("/proc/diskstats").read_text())
    )
    assert both["stat"].startswith("cpu ") and "MemTotal:" in both["meminfo"]
    device = next(iter(parse_diskstats(first["diskstats"])))
    assert host.device_sectors_read(device) is not None
    assert len(shell.execs) == 2
    time.sleep(PROC_SHARE_S + 0.05)
    host.read_proc("diskstats")
    assert len(shell.execs) == 3


def test_pod_host_names_what_it_cannot_read() -> None:
    host, _ = pod_host()
    with pytest.raises(HowfastError, match="/proc/no-such-file"):
        host.read_proc("no-such-file")


def test_server_counters_script_reads_this_machines_cgroup() -> None:
    """Here the v1 files are the root cgroup's (a container sees its own at those paths);
    no PostgreSQL data directory here, so no processes."""
    host, _ = pod_host()
    counters = host.server_counters()
    assert counters is not None
    version, _ = own_cgroup_path(Path("/proc/self/cgroup").read_text())
    if version != "v1" or not Path(CGROUP_V1_FILES["io_bytes"]).exists():
        pytest.skip("this machine has no cgroup v1 blkio hierarchy to read")
    reading = counters.read()
    assert counters.version == "v1" and counters.source.startswith("cgroup v1 of the server")
    assert reading.cpu.usage_ns is not None and reading.cpu.usage_ns > 0
    assert reading.postmaster is None and reading.processes == {}


class SilentCounters(ShellHere):
    """The server container's counters read by an exec that ends with a status and prints
    nothing, as an exec the API server cut or a container killed mid-read does (the lab's
    cluster is not for unit tests): the cgroup is found, then every reading fails silently."""

    def exec(
        self, namespace: str, pod: str, container: str, command: list[str], *, timeout_s: float
    ) -> ExecResult:
        if command != ["cat", "/proc/self/cgroup"]:
            command = ["/bin/sh", "-c", "exit 137"]
        return super().exec(namespace, pod, container, command, timeout_s=timeout_s)


def test_a_server_sampler_whose_exec_says_nothing_gives_its_exit_status() -> None:
    counters = PodHost(POD, SilentCounters()).server_counters()  # type: ignore[arg-type]
    assert counters is not None
    sampler = ContainerServerSampler(counters, {})
    sampler.start(context())
    assert sampler.stop().warnings == [
        "sampler serverio could not start: cannot read the server container's counters: "
        "the exec exited with status 137 and printed nothing"
    ]


def test_pod_host_names_a_filesystem_as_this_machine_does(tmp_path: Path) -> None:
    """From the mount's type in mountinfo, not `stat -f` (which says "ext2/ext3" of ext4:
    seen in the lab's target records)."""
    host, _ = pod_host()
    assert host.fstype(tmp_path) == LocalHost().fstype(tmp_path)
    assert host.fstype(tmp_path) != "ext2/ext3"


def test_the_server_script_succeeds_when_a_listed_process_is_gone(tmp_path: Path) -> None:
    """The script run by this machine's /bin/sh on a data directory whose postmaster.pid
    names a process that has exited (as a short-lived backend exits between the listing of
    the postmaster's children and the read of its /proc/PID/io): a reading, not a failure."""
    from howfast.machine.podread import server_argv

    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its PID names no process now
    (tmp_path / "postmaster.pid").write_text(f"{gone.pid}\n{tmp_path}\n")
    out = subprocess.run(server_argv({}, str(tmp_path)), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    reading = parse_server("v2", {}, out.stdout)
    assert reading.postmaster == gone.pid and reading.processes == {}
