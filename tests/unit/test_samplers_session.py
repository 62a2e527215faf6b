"""The sampler machinery: background ticks, failures that become warnings, the real /proc
and log samplers on files that change under them, and how a session joins the outcome."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from howfast.analysis.derive import derive_step
from howfast.errors import HowfastError
from howfast.hosts.base import Host
from howfast.hosts.local import LocalHost
from howfast.machine.devices import RoleDevice
from howfast.model import Sample, StepRecord
from howfast.runner.step import with_sampled
from howfast.samplers import base
from howfast.samplers.base import PeriodicSampler, SamplerContext, SamplerResult
from howfast.samplers.checkpoints import CheckpointSampler
from howfast.samplers.cpu import CpuSampler
from howfast.samplers.diskstats import DiskSampler, counter_delta, parse_diskstats
from howfast.samplers.session import StepSampling, TargetSampling
from howfast.targets.base import PlannedTarget, Target
from howfast.workloads.base import StepOutcome

PROC = Path(__file__).parent.parent / "data" / "proc"
FAST = 0.05


class FakeTarget(Target):
    name = "fake"
    kind = "fake"

    def check(self, *, will_init: bool) -> None: ...
    def start(self) -> None: ...
    def record(self):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def stop(self) -> None: ...

    def host(self) -> Host:
        return LocalHost()

    def planned(self) -> PlannedTarget:
        return PlannedTarget(self.host(), None, None)


def context(interval: float = FAST) -> SamplerContext:
    return SamplerContext(FakeTarget(), None, interval_s=interval)


class Counting(PeriodicSampler):
    name = "counting"

    def __init__(self, fail_begin: bool = False, fail_at: int | None = None) -> None:
        super().__init__()
        self.fail_begin, self.fail_at = fail_begin, fail_at
        self.ticks: list[float] = []

    def begin(self, ctx: SamplerContext) -> None:
        if self.fail_begin:
            raise PermissionError("[Errno 13] Permission denied: '/proc/diskstats'")

    def tick(self, t: float) -> None:
        if self.fail_at is not None and len(self.ticks) == self.fail_at:
            raise OSError("the file vanished")
        self.ticks.append(t)

    def result(self) -> SamplerResult:
        return SamplerResult(series={"n": [Sample(t, 1.0) for t in self.ticks]})


def test_ticks_come_on_a_grid_and_the_last_one_at_stop() -> None:
    sampler = Counting()
    sampler.start(context())
    time.sleep(6 * FAST)
    result = sampler.stop()
    assert result.warnings == []
    assert len(sampler.ticks) >= 4
    # On the grid: the i-th reading (but the one at stop) never comes before (i+1)
    # intervals. How late it comes is the machine's load, not the sampler's rule, so no
    # upper bound is asserted.
    assert all(t >= (i + 1) * FAST - 1e-3 for i, t in enumerate(sampler.ticks[:-1])), sampler.ticks
    assert sampler.ticks[-1] >= 6 * FAST  # the reading taken at stop


def test_a_sampler_that_cannot_start_is_a_warning_not_an_error() -> None:
    sampler = Counting(fail_begin=True)
    sampler.start(context())
    result = sampler.stop()
    assert sampler.ticks == []
    assert result.warnings == [
        "sampler counting could not start: [Errno 13] Permission denied: '/proc/diskstats'"
    ]


def test_a_failing_tick_stops_the_sampler_and_keeps_what_it_read() -> None:
    sampler = Counting(fail_at=2)
    sampler.start(context())
    time.sleep(5 * FAST)
    result = sampler.stop()
    assert len(result.series["n"]) == 2
    assert result.warnings == ["sampler counting stopped: the file vanished"]


def until(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Wait for what the sampler's thread does (a loaded machine may delay it)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the sampler's thread did not get there"
        time.sleep(FAST / 5)


class Outage(Counting):
    """Its readings fail while `down` is set, as a sampler's connection through a restart;
    `resume` (the reconnection) fails too until the service is back."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.resumed = 0

    def resume(self, ctx: SamplerContext) -> bool:
        if self.down:
            raise OSError("connection refused")
        self.resumed += 1
        return True

    def tick(self, t: float) -> None:
        if self.down:
            raise OSError("server closed the connection unexpectedly")
        self.ticks.append(t)


def test_readings_missed_while_an_event_disturbs_leave_a_gap_and_the_sampler_resumes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(base, "RESUME_EVERY_S", 0.0)
    sampler = Outage()
    ctx = context()
    disturbed = [False]
    ctx.disturbed = lambda: disturbed[0]
    sampler.start(ctx)
    until(lambda: len(sampler.ticks) >= 2)
    went_down = ctx.now()
    disturbed[0] = sampler.down = True
    until(lambda: sampler.missed_readings >= 3)  # the reading, then resumes, failed
    came_back = ctx.now()
    sampler.down = False  # back; the grace still runs
    until(lambda: sampler.resumed == 1 and len(sampler.ticks) >= 4)
    disturbed[0] = False
    result = sampler.stop()
    assert result.warnings == []
    assert sampler.reconnects == sampler.resumed == 1
    # the outage is a gap in the series; readings on both sides of it
    times = [p.t for p in result.series["n"]]
    assert len([t for t in times if t < went_down]) >= 2
    assert not [t for t in times if went_down + FAST < t < came_back - FAST]
    assert len([t for t in times if t > came_back]) >= 2


def test_a_reading_that_fails_outside_an_event_still_stops_the_sampler() -> None:
    sampler = Outage()
    ctx = context()
    ctx.disturbed = lambda: False
    sampler.start(ctx)
    until(lambda: len(sampler.ticks) >= 1)
    sampler.down = True
    until(lambda: sampler._failure is not None)
    result = sampler.stop()
    assert result.warnings == [
        "sampler counting stopped: server closed the connection unexpectedly"
    ]
    assert sampler.missed_readings == 0


def test_a_sampler_that_cannot_resume_once_the_event_is_over_stops_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(base, "RESUME_EVERY_S", 0.0)
    sampler = Outage()
    ctx = context()
    disturbed = [True]
    ctx.disturbed = lambda: disturbed[0]
    sampler.down = True
    sampler.start(ctx)
    until(lambda: sampler.missed_readings >= 1)
    disturbed[0] = False  # the grace is over and the server still refuses
    until(lambda: sampler._failure is not None)
    result = sampler.stop()
    assert result.warnings == [
        "sampler counting stopped after an event cut its connection: connection refused"
    ]


def test_a_stuck_sampler_is_left_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "STOP_TIMEOUT_S", 0.05)

    class Stuck(Counting):
        def tick(self, t: float) -> None:
            time.sleep(0.5)

    sampler = Stuck()
    sampler.start(context(0.01))
    time.sleep(0.05)
    result = sampler.stop()
    assert result.warnings == ["sampler counting did not stop in time; its samples are lost"]


def test_disk_sampler_reads_the_devices_of_each_role(tmp_path: Path) -> None:
    diskstats = tmp_path / "diskstats"
    diskstats.write_text((PROC / "diskstats-recorded-1.txt").read_text())
    sampler = DiskSampler({"data": "loop0", "wal": "loop1"}, path=diskstats)
    sampler.start(context(10.0))  # no tick of its own: begin, then the one at stop
    diskstats.write_text((PROC / "diskstats-recorded-2.txt").read_text())
    result = sampler.stop()
    roles = result.sections["io"]["roles"]
    before = parse_diskstats((PROC / "diskstats-recorded-1.txt").read_text())
    after = parse_diskstats((PROC / "diskstats-recorded-2.txt").read_text())
    assert roles["wal"]["delta"] == counter_delta(before["loop1"], after["loop1"])
    assert roles["data"]["device"] == "loop0"
    assert [len(result.series[f"io.{r}.write_iops"]) for r in ("data", "wal")] == [1, 1]


def test_disk_sampler_without_its_device_says_so(tmp_path: Path) -> None:
    diskstats = tmp_path / "diskstats"
    diskstats.write_text((PROC / "diskstats-recorded-1.txt").read_text())
    sampler = DiskSampler({"data": "nvme9n1"}, path=diskstats)
    sampler.start(context())
    result = sampler.stop()
    assert result.warnings == [f"sampler diskstats could not start: nvme9n1 not in {diskstats}"]


def stamp(offset_s: float = 0.0) -> str:
    now = datetime.fromtimestamp(time.time() + offset_s, tz=UTC)
    return now.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC [7] LOG:  "


COMPLETE = (
    "checkpoint complete: wrote 120 buffers (0.7%); 0 WAL file(s) added, 0 removed, "
    "1 recycled; write=0.101 s, sync=0.010 s, total=0.120 s; sync files=3, longest=0.005 s, "
    "average=0.003 s; distance=16384 kB, estimate=16384 kB"
)


def test_checkpoint_sampler_follows_the_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    # Before the step: an old checkpoint, then one that is still running.
    log.write_text(
        f"{stamp(-60)}checkpoint starting: time\n{stamp(-59)}{COMPLETE}\n"
        f"{stamp(-2)}checkpoint starting: wal\n"
    )
    sampler = CheckpointSampler(log)
    sampler.start(context())
    with log.open("a") as f:
        f.write(f"{stamp()}{COMPLETE}\n{stamp()}checkpoint starting: immediate force wait\n")
        f.write(f"{stamp()}LOG:  some other line\n{stamp()}{COMPLETE}")  # no newline yet
    time.sleep(3 * FAST)
    with log.open("a") as f:
        f.write("\n")
    result = sampler.stop()
    events = result.events
    assert [e["reason"] for e in events] == ["wal", "requested"]
    assert events[0]["start_t"] == pytest.approx(-2.0, abs=0.1)  # began before the step
    assert events[0]["buffers"] == 120
    # Written after the start; the log's stamps are milliseconds, truncated: 1 ms of slack.
    assert -0.001 <= float(events[1]["start_t"]) <= float(events[1]["end_t"])
    assert result.sections["postgres"]["checkpoints"] == events


def test_cpu_sampler_on_this_machine_with_a_tracked_process() -> None:
    ctx = context()
    session = StepSampling([CpuSampler()], ctx, [])
    session.start()
    session.track_process(os.getpid())
    deadline = time.monotonic() + 4 * FAST
    while time.monotonic() < deadline:
        pass  # keep a core busy so that the process has CPU to show
    session.stop()
    result = session.result
    assert result is not None
    cpu = result.sections["cpu"]
    assert {"user_pct", "system_pct", "iowait_pct", "steal_pct", "idle_pct"} <= cpu.keys()
    assert isinstance(cpu["page_cache_bytes_end"], int)
    assert cpu["load_generator"]["pid"] == os.getpid()
    assert cpu["load_generator"]["cpu_pct"] > 10
    assert {"cpu.user_pct", "mem.page_cache_bytes", "pgbench.cpu_pct"} <= result.series.keys()


class Fixed(PeriodicSampler):
    """A sampler returning a prepared result."""

    name = "fixed"

    def __init__(self, result: SamplerResult) -> None:
        super().__init__()
        self.prepared = result

    def begin(self, ctx: SamplerContext) -> None: ...
    def tick(self, t: float) -> None: ...
    def result(self) -> SamplerResult:
        return self.prepared


def test_a_session_joins_series_metrics_warnings_and_sections_to_the_outcome() -> None:
    prepared = SamplerResult(
        series={"io.data.write_mbps": [Sample(1.0, 2.0), Sample(2.0, 6.0)]},
        metrics={"tps": -1.0},
        warnings=["sampler x stopped: gone"],
        sections={
            "io": {"roles": {"data": {"device": "sda", "seconds": 2.0, "delta": {"writes": 8}}}},
            "postgres": {"views": {}, "checkpoints": []},
        },
    )
    roles = [
        RoleDevice("data", "/d", "sda", fstype="ext4"),
        RoleDevice("wal", "/d/pg_wal", "sda", shares_with="data", fstype="ext4"),
    ]
    session = StepSampling([Fixed(prepared)], context(10.0), roles)
    session.start()
    session.stop()
    tool = StepOutcome(metrics={"tps": 1234.5}, series={"tps": [Sample(1.0, 1.0)]})
    outcome = with_sampled(tool, session.part())
    assert outcome.metrics["tps"] == 1234.5  # the tool's own figure wins
    assert outcome.series["io.data.write_mbps"] == prepared.series["io.data.write_mbps"]
    assert outcome.warnings == ("sampler x stopped: gone",)
    assert tool.warnings == () and set(tool.metrics) == {"tps"}  # a new outcome
    assert set(outcome.sections) == {"io", "cpu", "postgres"}
    # What the samples mean is derived when the step is read.
    step = derive_step(
        StepRecord(
            target="fake",
            workload="pgbench",
            params={"duration_s": 30},
            status="completed",
            started_at="",
            finished_at="",
            metrics=dict(outcome.metrics),
            warnings=list(outcome.warnings),
            series={name: list(points) for name, points in outcome.series.items()},
            sections={name: dict(content) for name, content in outcome.sections.items()},
        ),
        [],
    )
    assert step.metrics["tps"] == 1234.5
    assert step.metrics["io_data_write_iops"] == 4.0
    assert step.metrics["checkpoints"] == 0
    assert step.warnings == ["sampler x stopped: gone"]
    io = step.sections["io"]
    assert io["roles"]["wal"] == {
        "path": "/d/pg_wal",
        "device": "sda",
        "fstype": "ext4",
        "same_device_as": "data",
    }
    assert io["roles"]["data"]["summary"]["write_iops"] == 4.0
    assert io["interval_s"] == 10.0


def test_only_pgbench_and_fio_steps_are_sampled_and_zero_turns_it_off() -> None:
    sampling = TargetSampling(FakeTarget(), None, 1.0)
    idle = sampling.start("pgbench-init")
    assert idle.samplers == []
    idle.stop()
    assert idle.part() is None
    outcome = with_sampled(StepOutcome(), idle.part())
    assert outcome == StepOutcome()
    assert TargetSampling(FakeTarget(), None, None).start("pgbench").samplers == []
    busy = sampling.start("fio")
    assert [s.name for s in busy.samplers] == ["cpu"]  # no devices, server or log here
    busy.stop()


@pytest.mark.parametrize(
    ("raised", "said"),
    [
        # issue 26: the K8s server sampler stopped with "...counters:" and nothing after it
        (
            HowfastError("cannot read the server container's counters: "),
            "cannot read the server container's counters: no reason given (HowfastError)",
        ),
        (TimeoutError(), "TimeoutError"),
        (OSError("   \n"), "OSError"),
        (HowfastError("pgbench exited with status 1:\n\nERROR: disk full"), None),
    ],
)
def test_a_sampler_that_stops_always_says_why(raised: BaseException, said: str | None) -> None:
    class Failing(Counting):
        def tick(self, t: float) -> None:
            raise raised

    sampler = Failing()
    sampler.start(context())
    time.sleep(3 * FAST)
    (warning,) = sampler.stop().warnings
    reason = warning.removeprefix("sampler counting stopped: ")
    assert reason == (said or "pgbench exited with status 1: ERROR: disk full")
