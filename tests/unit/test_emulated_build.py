"""Pure builders of emulated volumes: nbdkit/nbdfuse argv, cgroup limit lines, variants, and
the check that compares the latency asked with the latency measured."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path, PurePath

import pytest

from howfast.analysis.emulation import latency_warning
from howfast.errors import Aborted
from howfast.iolimits import IoLimits, throttle_lines
from howfast.targets.emulated.build import (
    DELAY_PLUGIN,
    Limits,
    losetup_argv,
    mount_argv,
    nbdfuse_argv,
    nbdkit_argv,
    plain_nbdkit_argv,
    variants,
)
from howfast.targets.emulated.storage import qd1_check_argv, write_floor_ms
from howfast.targets.emulated.target import write_latency_ms
from howfast.targets.emulated.volume import loop_devices_of, run_interruptibly

IMG, SOCK, PID = PurePath("/t/v/volume.img"), PurePath("/dev/shm/r/nbdkit.sock"), PurePath("/p")


def test_nbdkit_serves_the_image_on_a_unix_socket_through_the_delay_plugin():
    argv = nbdkit_argv(IMG, SOCK, PID, 2.0)
    assert argv[:6] == ["nbdkit", "--foreground", "--unix", str(SOCK), "--pidfile", str(PID)]
    assert argv[6:] == ["python", str(DELAY_PLUGIN), f"file={IMG}", "delay-ms=2.0"]
    # Zero added is the same layers, only the delay differs.
    assert nbdkit_argv(IMG, SOCK, PID, 0.0)[6:] == ["python", str(DELAY_PLUGIN), f"file={IMG}",
                                                    "delay-ms=0.0"]  # fmt: skip
    assert not any(a.startswith(("-i", "--ipaddr", "-p", "--port")) for a in argv)  # no TCP


def test_the_reference_server_is_nbdkits_file_plugin_without_delay():
    assert plain_nbdkit_argv(IMG, SOCK, PID)[6:] == ["file", str(IMG)]


def test_the_delay_plugin_takes_fractions_of_a_millisecond_exactly():
    assert nbdkit_argv(IMG, SOCK, PID, 0.5)[-1] == "delay-ms=0.5"
    assert nbdkit_argv(IMG, SOCK, PID, 1234.5678)[-1] == "delay-ms=1234.5678"
    assert nbdkit_argv(IMG, SOCK, PID, 2)[-1] == "delay-ms=2.0"


def test_the_delay_plugin_ships_inside_the_package():
    assert DELAY_PLUGIN.is_file() and DELAY_PLUGIN.parent.name == "emulated"
    text = DELAY_PLUGIN.read_text()
    # nbdkit calls these by name: the flush is delayed like reads and writes.
    for callback in ("def pread(", "def pwrite(", "def flush(", "def zero(", "def open("):
        assert callback in text


def test_nbdfuse_and_losetup():
    assert nbdfuse_argv(PurePath("/r/fuse"), SOCK, PID) == [
        "nbdfuse", "--pidfile", "/p", "/r/fuse", "--unix", str(SOCK)
    ]  # fmt: skip
    assert "--direct-io=on" in losetup_argv(PurePath("/r/fuse/nbd"))


def test_mount_leaves_the_lazy_inode_tables_alone():
    # Measured on a fresh 256 MiB ext4 loop volume: 16 MB written in 6 idle seconds after a
    # plain mount, none with noinit_itable.
    argv = mount_argv("/dev/loop3", PurePath("/w/mnt"))
    assert argv[:2] == ["mount", "-o"] and argv[-2:] == ["/dev/loop3", "/w/mnt"]
    assert set(argv[2].split(",")) == {"noatime", "noinit_itable"}


def test_cgroup_lines_for_v1_and_v2():
    caps = Limits(latency_ms=0, iops=200).io_limits()
    assert throttle_lines("v1", "7:0", caps) == {
        "blkio.throttle.read_iops_device": "7:0 200",
        "blkio.throttle.write_iops_device": "7:0 200",
    }
    assert throttle_lines("v2", "7:0", caps) == {
        "io.max": "7:0 riops=200 wiops=200 rbps=max wbps=max"
    }
    both = throttle_lines("v1", "7:3", Limits(iops=5, bps=1 << 20).io_limits())
    assert both["blkio.throttle.write_bps_device"] == "7:3 1048576"
    assert throttle_lines("v1", "7:0", Limits(latency_ms=2).io_limits()) == {}
    split = throttle_lines("v2", "8:0", IoLimits(read_iops=100, write_iops=50, weight=300))
    assert split == {"io.max": "8:0 riops=100 wiops=50 rbps=max wbps=max", "io.weight": "300"}
    assert throttle_lines("v1", "8:0", IoLimits(weight=300)) == {"blkio.bfq.weight": "300"}


def test_variants_and_names():
    found = variants([0.0, 2.0], [None, 500])
    assert [v.describe() for v in found] == ["+0ms", "+0ms 500 IOPS", "+2ms", "+2ms 500 IOPS"]


def test_asked_against_measured_latency():
    assert latency_warning(2.0, 2.4) is None  # within 25%
    warning = latency_warning(2.0, 2.64)
    assert warning is not None and "+32%" in warning and "2 ms asked" in warning
    assert latency_warning(0.0, 0.05) is None
    assert "none was asked" in (latency_warning(0.0, 4.9) or "")


def test_write_latency_from_fio_json_after_a_notice():
    doc = {"jobs": [{"write": {"lat_ns": {"mean": 2480000.0}}}]}
    assert write_latency_ms("fio: some notice\n" + json.dumps(doc)) == pytest.approx(2.48)
    assert write_floor_ms("fio: some notice\n" + json.dumps(doc)) == pytest.approx(2.48)


def test_the_added_latency_is_judged_on_a_low_percentile_of_the_writes():
    """A loaded machine lengthens some writes, the mean with them; the 10th percentile keeps
    the delay and little else (fio's JSON with --lat_percentiles=1)."""
    percentiles = {"1.000000": 2010000, "10.000000": 2090000, "50.000000": 2400000}
    doc = {"jobs": [{"write": {"lat_ns": {"mean": 3900000.0, "percentile": percentiles}}}]}
    assert write_floor_ms(json.dumps(doc)) == pytest.approx(2.09)
    assert write_latency_ms(json.dumps(doc)) == pytest.approx(3.9)
    assert "--lat_percentiles=1" in qd1_check_argv(Path("/mnt/v/.howfast-qd1-check"))


def test_a_run_read_later_says_when_the_volume_added_another_latency():
    from howfast.analysis.derive import derive_run
    from howfast.model import RunRecord, StepRecord, TargetRecord

    emulation = {"asked_latency_ms": 2.0, "measured_added_latency_ms": 2.9}
    targets = [
        TargetRecord("d +2ms", "local", device={"emulation": emulation}),
        TargetRecord("d +0ms", "local", device={"emulation": {"asked_latency_ms": 0.0,
                                                              "measured_added_latency_ms": 0.02}}),
    ]  # fmt: skip
    steps = [
        StepRecord(t, "seqread", {}, "completed", "a", "b") for t in ("d +2ms", "d +2ms", "d +0ms")
    ]
    run = RunRecord(1, "latency", "completed", "a", "b", {}, targets, steps)
    derived = derive_run(run)
    first, second, other = derived.steps
    assert len(first.warnings) == 1 and "+45% off the 2 ms asked" in first.warnings[0]
    assert second.warnings == [] and other.warnings == []
    assert run.steps[0].warnings == []  # the stored run is not changed
    assert derive_run(derived).steps[0].warnings == first.warnings  # said once


def test_tps_by_added_latency_table_and_chart():
    from howfast.analysis.emulation import latency_sweep
    from howfast.model import RunRecord, StepRecord, TargetRecord
    from howfast.report.sweep_table import sweep_charts, sweep_table

    def target(name: str, asked: float, measured: float) -> TargetRecord:
        emulation = {"asked_latency_ms": asked, "measured_added_latency_ms": measured,
                     "io_limits": {"blkio.throttle.write_iops_device": "7:0 2000"}}  # fmt: skip
        return TargetRecord(name, "local", device={"emulation": emulation})

    def step(name: str, tps: float, p99: float, **extra: object) -> StepRecord:
        params = {"mode": "tpcb-like", "clients": 16, **extra}
        metrics = {"tps": tps, "latency_p99_ms": p99}
        return StepRecord(name, "pgbench", params, "completed", "a", "b", metrics=metrics)

    run = RunRecord(
        7, "latency", "completed", "a", "b", {},
        [target("d +0ms", 0.0, 0.05), target("d +2ms", 2.0, 2.5)],
        [step("d +2ms", 400.0, 60.0), step("d +0ms", 1500.0, 20.0),
         step("d +0ms", 1000.0, 15.0, rate=1050.0)],  # a fixed rate is not the volume's
    )  # fmt: skip
    points = latency_sweep(run)
    assert [(p.asked_ms, p.tps, p.iops) for p in points] == [(0.0, 1500.0, 2000),
                                                             (2.0, 400.0, 2000)]  # fmt: skip
    table = sweep_table(run)
    assert table is not None
    assert [[c.text for c in row] for row in table.rows][1] == [
        "pgbench tpcb-like, 16 clients", "+2 ms (2.50 measured), 2,000 IOPS", "400.0", "60.00"
    ]  # fmt: skip
    (chart,) = sweep_charts(run)
    assert [t.name for t in chart.traces] == ["TPS", "p99"] and chart.traces[1].axis == "y2"
    assert chart.traces[0].x == [0.0, 2.0] and chart.traces[0].y == [1500.0, 400.0]
    single = RunRecord(8, "quick", "completed", "a", "b", {}, run.targets[:1], run.steps[1:2])
    assert latency_sweep(single) == [] and sweep_table(single) is None


def test_without_nbdkits_python_plugin_the_backend_says_what_to_install(monkeypatch, tmp_path):
    from howfast.targets.emulated import volume

    if volume.available().name is None:
        pytest.skip(f"no emulated volumes here: {volume.available().reason}")
    monkeypatch.setattr(volume, "NBDKIT_PLUGIN_DIRS", (str(tmp_path),))  # no plugin there
    backend = volume.available()
    assert backend.name is None
    assert backend.reason == "nbdkit's python plugin is not installed (nbdkit-plugin-python)"
    assert "nbdkit-plugin-python" in volume.INSTALL_HINT


def test_the_delay_plugin_is_told_where_its_nodelay_file_is():
    argv = nbdkit_argv(IMG, SOCK, PID, 100.0, PurePath("/dev/shm/r/nodelay"))
    assert argv[6:] == ["python", str(DELAY_PLUGIN), f"file={IMG}", "delay-ms=100.0",
                        "nodelay-file=/dev/shm/r/nodelay"]  # fmt: skip
    assert "nodelay-file" in DELAY_PLUGIN.read_text()


def test_loop_devices_are_found_by_their_backing_file_in_sysfs(tmp_path: Path):
    """As /sys/block lists them (recorded layout): the volume's own, also once its file is
    gone, and not another volume's."""
    for name, backing in (
        ("loop0", "/dev/shm/howfast-vol-a-1/fuse/nbd\n"),
        ("loop1", "/dev/shm/howfast-vol-b-2/fuse/nbd\n"),
        ("loop7", "/dev/shm/howfast-vol-a-1/fuse/nbd (deleted)\n"),
    ):
        (tmp_path / name / "loop").mkdir(parents=True)
        (tmp_path / name / "loop" / "backing_file").write_text(backing)
    (tmp_path / "loop3").mkdir()  # not attached: no loop/ directory
    mine = Path("/dev/shm/howfast-vol-a-1/fuse/nbd")
    assert loop_devices_of(mine, tmp_path) == ["/dev/loop0", "/dev/loop7"]


def interrupt_after(seconds: float) -> None:
    """Raise in the main thread after `seconds`, as the runner's signal guard does (Aborted)."""

    def handler(signum: int, frame: object) -> None:
        raise Aborted("SIGINT")

    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def test_an_interrupted_tool_gets_the_delay_lifted_and_ends_by_itself(tmp_path: Path):
    lifted = tmp_path / "nodelay"
    stuck: list[int] = []  # never called: the tool ends once the delay is lifted
    # A tool that waits until the delay is lifted, as a mount waits for its delayed reads.
    tool = ["sh", "-c", f'while [ ! -e "{lifted}" ]; do sleep 0.02; done; echo done']
    previous = signal.getsignal(signal.SIGALRM)
    try:
        interrupt_after(0.3)
        started = time.monotonic()
        with pytest.raises(Aborted):
            run_interruptibly(tool, lifted.touch, settle_s=20, stuck=lambda: stuck.append(1))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert lifted.exists() and stuck == []
    assert time.monotonic() - started < 5  # it ended once lifted, well before settle_s


def test_a_tool_that_does_not_end_is_killed_after_the_settle_time(tmp_path: Path):
    """A tool still running once the delay is lifted waits for a request that will not end:
    `stuck` fails the requests in flight (for a volume: nbdkit killed), then it is killed."""
    previous = signal.getsignal(signal.SIGALRM)
    called = []
    try:
        interrupt_after(0.2)
        started = time.monotonic()
        with pytest.raises(Aborted):
            run_interruptibly(["sleep", "60"], lambda: called.append("lifted"), settle_s=0.5,
                              stuck=lambda: called.append("stuck"))  # fmt: skip
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert called == ["lifted", "stuck"]
    assert time.monotonic() - started < 5


def test_a_tool_that_is_not_interrupted_gives_its_output():
    out = run_interruptibly(["sh", "-c", "echo out; echo err >&2; exit 3"], lambda: None)
    assert (out.returncode, out.stdout, out.stderr) == (3, "out\n", "err\n")
