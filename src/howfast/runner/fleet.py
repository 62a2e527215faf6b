"""A fleet run: for each scenario, many instances of one target (a directory's subdirectories,
or pods in a namespace) started together, every step run on all of them at once (a barrier
starts their tools together), and all of them stopped whatever happens. One howfast process
drives them: a thread per instance only while a step runs, a small pool to start and stop
them, and store writes in this thread.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from howfast.errors import Aborted, HowfastError
from howfast.iolimits import IoCounters
from howfast.model import JSONValue, StepSpec, TargetRecord
from howfast.observer import StepRef
from howfast.plans.fleet import FleetScenario
from howfast.runner.run import RunInfo, RunResult, RunSettings, record_run
from howfast.runner.signals import SignalGuard
from howfast.runner.step import (
    StepEnvironment,
    execute_step,
    expected,
    store_step,
    unloaded_reason,
)
from howfast.runner.target_session import new_work_root
from howfast.samplers.session import TargetSampling
from howfast.targets.base import Connection
from howfast.targets.capabilities import HasServerLog
from howfast.targets.fleet_base import FleetInstance, FleetPlace
from howfast.workloads import get_workload
from howfast.workloads.base import StepOutcome, Workload

POOL = 4  # instances started or stopped at once: initdb and start-up are CPU-heavy
BARRIER_TIMEOUT_S = 600  # every instance reaches the start of a step well before this
JOIN_POLL_S = 0.2  # the main thread wakes this often, so that signals are handled


@dataclass
class Live:
    """A started instance and what its steps share."""

    member: FleetInstance
    env: StepEnvironment
    connection: Connection | None
    failed_start: str | None = None


@dataclass
class StepResult:
    outcome: StepOutcome
    started: str
    counters: IoCounters | None = None
    seconds: float = 0.0
    extra: dict[str, JSONValue] = field(default_factory=dict)


class FleetRunner:
    def __init__(
        self, settings: RunSettings, place: FleetPlace, scenarios: Sequence[FleetScenario]
    ) -> None:
        self.settings = settings
        self.place = place
        self.scenarios = list(scenarios)
        self.steps = settings.steps
        self.guard = SignalGuard(settings.observer, settings.cancel)

    @property
    def total_steps(self) -> int:
        return sum(s.instances for s in self.scenarios) * len(self.steps)

    def check(self) -> None:
        """Everything that can be refused before the run exists."""
        self.place.check(self.scenarios)

    def execute(self) -> RunResult:
        self.guard = SignalGuard(self.settings.observer, self.settings.cancel)
        instances = sum(s.instances for s in self.scenarios)

        def scenarios(run_id: int) -> int:
            self.place.open()
            failed, first = 0, 0
            for scenario in self.scenarios:
                failed += self._scenario(run_id, scenario, first)
                first += scenario.instances * len(self.steps)
            return failed

        def cleanup() -> None:
            self.place.close()

        info = RunInfo(self.settings.plan_name, self.settings.label, self.total_steps, instances)
        return record_run(
            self.settings.store,
            self.guard,
            info,
            self.check,
            scenarios,
            cleanup,
            clock=self.settings.clock,
        )

    # -- one scenario ---------------------------------------------------------------------
    def _scenario(self, run_id: int, scenario: FleetScenario, first_index: int) -> int:
        members = self.place.members(scenario)
        for member in members:
            self.place.prepare(member)
        work_root = new_work_root()
        live: list[Live] = []
        failed = 0
        self.settings.observer.message(
            f"scenario {scenario.name}: starting {len(members)} instances "
            + ", ".join(f"{c.name} x{c.count} ({c.describe()})" for c in scenario.classes)
        )
        try:
            for member in members:
                self.settings.store.add_target(
                    run_id, TargetRecord(name=member.name, kind=member.kind)
                )
            live = self._start_all(run_id, members)
            for offset, spec in enumerate(self.steps):
                failed += self._step(run_id, live, spec, offset, first_index, work_root)
        finally:
            with self.guard.critical():
                self._stop_all(members)
                shutil.rmtree(work_root, ignore_errors=True)
        return failed

    def _start_all(self, run_id: int, members: list[FleetInstance]) -> list[Live]:
        def start(member: FleetInstance) -> tuple[Connection | None, str | None]:
            try:
                member.check(will_init=True)
                return member.start(), None
            except (HowfastError, OSError) as exc:
                return None, str(exc)

        with ThreadPoolExecutor(POOL) as pool:
            started = list(pool.map(start, members))
        live = []
        for member, (connection, problem) in zip(members, started, strict=True):
            if problem is None:
                self.settings.store.update_target(run_id, member.record())
            env = StepEnvironment(
                run_id=run_id,
                target=member,
                host=member.host(),
                install=self.settings.install,
                store=self.settings.store,
                observer=self.settings.observer,
                guard=self.guard,
                previous=[],
                first_target=[],
                clock=self.settings.clock,
            )
            live.append(Live(member, env, connection, problem))
        return live

    def _stop_all(self, members: list[FleetInstance]) -> None:
        def stop(member: FleetInstance) -> str | None:
            try:
                member.stop()
            except Exception as exc:  # report, and go on with the others
                return f"warning: stopping {member.name} failed: {exc}"
            finally:
                self.place.discard(member)
            return None

        with ThreadPoolExecutor(POOL) as pool:
            for problem in pool.map(stop, members):
                if problem:
                    self.settings.observer.message(problem)

    # -- one step on every instance at once ---------------------------------------------
    def _step(
        self,
        run_id: int,
        live: list[Live],
        spec: StepSpec,
        offset: int,
        first_index: int,
        work_root: Path,
    ) -> int:
        self.guard.check()  # a run stopped from another thread ends here, between steps
        workload = get_workload(spec.workload)
        skipped = {  # an instance whose load failed: nothing to read, its step is skipped
            id(x): reason
            for x in live
            if x.failed_start is None
            and (reason := unloaded_reason(spec, x.env.previous, x.env.numbers)) is not None
        }
        running = [x for x in live if x.failed_start is None and id(x) not in skipped]
        barrier = threading.Barrier(len(running) or 1, timeout=BARRIER_TIMEOUT_S)
        results: dict[int, StepResult] = {}
        refs = {}
        for position, x in enumerate(live):
            index = first_index + position * len(self.steps) + offset
            params = {**spec.params, **x.member.fleet_params()}
            refs[id(x)] = StepRef(index, self.total_steps, x.member.name,
                                  workload.label(spec.params), spec.workload, params)  # fmt: skip
        for x in live:
            self.settings.observer.step_started(refs[id(x)], expected(spec))
        threads = [
            threading.Thread(
                target=self._run_one,
                args=(x, workload, spec, refs[id(x)], work_root, barrier, results),
                name=f"howfast-fleet-{x.member.klass}-{x.member.index}",
                daemon=True,
            )
            for x in running
        ]
        for t in threads:
            t.start()
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(JOIN_POLL_S)
        except Aborted:
            barrier.abort()
            for t in threads:  # their tools stop on the run's cancel token
                t.join(30)
            raise
        failed = 0
        for x in live:
            result = results.get(id(x))
            if id(x) in skipped:
                skip = StepOutcome(status="skipped", error=skipped[id(x)])
                result = StepResult(skip, self.settings.clock.now())
            elif result is None:
                reason = x.failed_start or "the instance's step did not finish"
                result = StepResult(
                    StepOutcome(status="failed", error=reason), self.settings.clock.now()
                )
            outcome = result.outcome.with_resolved(result.extra)
            if outcome.status == "failed":
                failed += 1
                if x.failed_start is None and isinstance(x.member, HasServerLog):
                    tail = x.member.server_log_tail(10)
                    if tail:
                        log = f"\n--- server log (last lines) ---\n{tail}"
                        outcome = outcome.with_error(f"{outcome.error}{log}")
            fleet_spec = StepSpec(spec.workload, {**spec.params, **x.member.fleet_params()},
                                  spec.repetition)  # fmt: skip
            store_step(x.env, fleet_spec, refs[id(x)], outcome, result.started)
        return failed

    def _run_one(
        self,
        x: Live,
        workload: Workload,
        spec: StepSpec,
        ref: StepRef,
        work_root: Path,
        barrier: threading.Barrier,
        results: dict[int, StepResult],
    ) -> None:
        started = self.settings.clock.now()
        step_dir = work_root / f"{x.member.klass}-{x.member.index}-step-{ref.index}"
        step_dir.mkdir()
        arrived = False
        before: list[tuple[IoCounters | None, float]] = []

        def ready() -> None:
            nonlocal arrived
            arrived = True
            barrier.wait()
            before.append((x.member.counters(), time.monotonic()))

        sampling = TargetSampling(x.member, None, None)
        try:
            outcome = execute_step(
                x.env, workload, spec, ref, x.connection, step_dir, sampling, ready
            )
        except threading.BrokenBarrierError:
            outcome = StepOutcome(status="failed", error="the fleet's step was interrupted")
        except Aborted as exc:
            outcome = StepOutcome(status="failed", error=f"interrupted by {exc.signal_name}")
        finally:
            if not arrived:  # failed before the barrier: release the others all the same
                with contextlib.suppress(threading.BrokenBarrierError):
                    barrier.wait()
        result = StepResult(outcome, started)
        if before:
            counters, t0 = before[0]
            after = x.member.counters()
            if counters is not None and after is not None:
                result.extra = own_io(after.minus(counters), time.monotonic() - t0)
        results[id(x)] = result


def own_io(delta: IoCounters, seconds: float) -> dict[str, JSONValue]:
    """The instance's own I/O during the step, from its cgroup: raw counts and the window."""
    return {
        "own_read_ios": delta.read_ios,
        "own_write_ios": delta.write_ios,
        "own_read_bytes": delta.read_bytes,
        "own_write_bytes": delta.write_bytes,
        "own_io_seconds": round(seconds, 3),
    }
