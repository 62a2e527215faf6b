"""A target that stops aside (StopsAside: Kubernetes) is stopped in a thread while the run's
next target starts, and that stop has ended before the next target's first step (issue 34).
The targets here are fakes that only say when each of their moves happens: what is tested
is the runner's order, which no real target shows without a cluster (the lab tests run the
Kubernetes targets through it)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from howfast.errors import Aborted
from howfast.hosts.base import Host
from howfast.hosts.local import LocalHost
from howfast.machine.pgbin import PgInstall
from howfast.model import JSONValue, StepSpec, TargetRecord
from howfast.runner import Runner, RunSettings
from howfast.store import open_store
from howfast.targets.base import PlannedTarget, Target
from howfast.targets.capabilities import StopsAside
from howfast.workloads.base import StepContext, StepOutcome, Workload

WAIT_S = 10.0  # only bounds a failure: the events below are set, not waited out


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.lock = threading.Lock()

    def add(self, line: str) -> None:
        with self.lock:
            self.lines.append(line)


class Recording(Target):
    kind = "fake"

    def __init__(self, name: str, log: Log) -> None:
        self.name = name
        self.log = log
        self.started = threading.Event()
        self.stop_waits_for: threading.Event | None = None  # held until the next one starts
        self.stop_fails = False
        self.start_aborts = False

    def check(self, *, will_init: bool) -> None: ...

    def start(self) -> None:
        self.log.add(f"{self.name} start")
        if self.start_aborts:
            raise Aborted("SIGINT")
        self.started.set()

    def record(self) -> TargetRecord:
        return TargetRecord(name=self.name, kind=self.kind)

    def stop(self) -> None:
        self.log.add(f"{self.name} stop begins in {threading.current_thread().name}")
        if self.stop_waits_for is not None:
            seen = self.stop_waits_for.wait(WAIT_S)
            self.log.add(f"{self.name} saw the next start: {seen}")
        self.log.add(f"{self.name} stop ends")
        if self.stop_fails:
            raise RuntimeError("the API server went away")

    def host(self) -> Host:
        return LocalHost()

    def planned(self) -> PlannedTarget:
        return PlannedTarget(self.host(), None, None)


class Aside(Recording, StopsAside):
    def stops_aside(self) -> bool:
        return True


class Messages:
    def __init__(self) -> None:
        self.told: list[str] = []

    def run_started(self, *args: object) -> None: ...
    def step_started(self, *args: object) -> None: ...
    def step_progress(self, *args: object) -> None: ...
    def step_finished(self, *args: object) -> None: ...

    def message(self, text: str) -> None:
        self.told.append(text)


class Logged(Workload):
    name = "pgbench"

    def __init__(self, log: Log) -> None:
        self.log = log

    def label(self, params: dict[str, JSONValue]) -> str:
        return "logged"

    def execute(self, ctx: StepContext, params: dict[str, JSONValue]) -> StepOutcome:
        self.log.add(f"{ctx.target.name} step")
        return StepOutcome(metrics={"tps": 1.0})


def run(targets: list[Target], log: Log, tmp_path: Path, monkeypatch) -> tuple[str, Messages]:
    monkeypatch.setattr("howfast.runner.target_session.get_workload", lambda _: Logged(log))
    observer = Messages()
    spec = StepSpec("pgbench", {"mode": "select-only", "clients": 1, "duration_s": 1})
    with open_store(str(tmp_path / "r.db")) as store:
        settings = RunSettings(
            store,
            [spec, spec],
            plan_name="t",
            install=PgInstall(bindir=tmp_path, version="15", source="test"),
            observer=observer,
        )
        runner = Runner(settings, targets, sample_interval_s=None)
        result = runner.execute()
    return result.status, observer


def test_a_stop_aside_runs_while_the_next_target_starts(tmp_path, monkeypatch) -> None:
    log = Log()
    a, b = Aside("a", log), Aside("b", log)
    a.stop_waits_for = b.started
    status, _ = run([a, b], log, tmp_path, monkeypatch)
    assert status == "completed"
    assert log.lines[:3] == ["a start", "a step", "a step"]
    assert log.lines[3].startswith("a stop begins in howfast-stop-aside")
    rest = log.lines[4:]
    assert "a saw the next start: True" in rest  # b started while a was stopping
    # b measures only once a's stop has ended; the last target stops in the main thread
    assert rest.index("a stop ends") < rest.index("b step")
    assert rest[-3:] == ["b step", "b stop begins in MainThread", "b stop ends"]


def test_a_target_that_does_not_stop_aside_stops_before_the_next_starts(
    tmp_path, monkeypatch
) -> None:
    log = Log()
    a, b = Recording("a", log), Aside("b", log)
    status, _ = run([a, b], log, tmp_path, monkeypatch)
    assert status == "completed"
    assert log.lines == [
        "a start", "a step", "a step", "a stop begins in MainThread", "a stop ends",
        "b start", "b step", "b step", "b stop begins in MainThread", "b stop ends",
    ]  # fmt: skip


def test_a_stop_aside_that_fails_is_told_and_the_run_goes_on(tmp_path, monkeypatch) -> None:
    log = Log()
    a, b = Aside("a", log), Aside("b", log)
    a.stop_fails = True
    status, observer = run([a, b], log, tmp_path, monkeypatch)
    assert status == "completed"
    assert "warning: stopping a failed: the API server went away" in observer.told
    assert log.lines.count("b step") == 2


def test_a_run_aborted_while_the_next_starts_still_ends_the_stop_aside(
    tmp_path, monkeypatch
) -> None:
    log = Log()
    a, b = Aside("a", log), Aside("b", log)
    b.start_aborts = True
    release = threading.Event()
    a.stop_waits_for = release
    threading.Timer(0.2, release.set).start()  # a's stop is still going when b aborts
    status, _ = run([a, b], log, tmp_path, monkeypatch)
    assert status == "aborted"
    assert "a stop ends" in log.lines  # awaited before the run ended
    assert "b step" not in log.lines


@pytest.fixture(autouse=True)
def _no_stray_threads():
    yield
    assert not [t for t in threading.enumerate() if t.name == "howfast-stop-aside"]
