"""The run: validate every target, create the run row, install the signal handlers, drive
each target's session (in turn, or interleaved for `--until`), and finish the run with its
status whatever happens.

Owns what must hold whatever happens: every finished step is committed to the store at once;
SIGINT/SIGTERM/SIGHUP/SIGQUIT stop the tool in flight and the server, remove what was created, and
mark the run aborted with its completed steps kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from howfast.cancel import CancelToken
from howfast.clock import SYSTEM_CLOCK, Clock
from howfast.errors import Aborted, UsageError
from howfast.machine import environment
from howfast.machine.pgbin import PgInstall
from howfast.model import StepRecord, StepSpec
from howfast.observer import RunObserver
from howfast.plans.until import Block, UntilRule
from howfast.plugin import registry
from howfast.runner.aside import StoppingAside
from howfast.runner.interleaved import InterleavedRun, planned_steps
from howfast.runner.signals import SignalGuard
from howfast.runner.step import StepEnvironment
from howfast.runner.target_session import TargetSession
from howfast.samplers.base import DEFAULT_INTERVAL_S
from howfast.samplers.session import SamplerFactory
from howfast.sizing import REGIMES
from howfast.store import liveness
from howfast.store.base import Store
from howfast.targets.base import Target
from howfast.targets.capabilities import HoldsDirectoryLock, StartsAhead, StopsAside


@dataclass
class RunResult:
    run_id: int
    status: str
    failed_steps: int


@dataclass(frozen=True)
class RunSettings:
    """What every kind of run takes besides what it runs on (Runner: targets; FleetRunner: a
    place and its scenarios): where it is stored, the steps, the PostgreSQL install, who
    hears of it. `clock`: the stored timestamps; `cancel`: a token that stops the run as a
    signal would (None: the run's own)."""

    store: Store
    steps: list[StepSpec]
    plan_name: str
    install: PgInstall
    observer: RunObserver
    label: str | None = None
    clock: Clock = SYSTEM_CLOCK
    cancel: CancelToken | None = None


class Runner:
    def __init__(
        self,
        settings: RunSettings,
        targets: list[Target],
        *,
        sample_interval_s: float | None = DEFAULT_INTERVAL_S,
        extra_samplers: Sequence[SamplerFactory] = (),
        until: tuple[UntilRule, Sequence[Block]] | None = None,
    ) -> None:
        """`until`: the rule and the plan's blocks (plans/expand.py `expand_blocks`) of an
        interleaved `--until` run; the settings' `steps` are then what --dry-run would list."""
        self.settings = settings
        self.targets = targets
        self.steps = settings.steps
        self.guard = SignalGuard(settings.observer, settings.cancel)
        self.sample_interval_s = sample_interval_s  # None or 0: no sampling
        self.extra_samplers = extra_samplers  # e.g. --prometheus's, for each sampled step
        self.until = until

    def check(self) -> None:
        """Validate every target before the run is created: bad input loses nothing."""
        loads = [s for s in self.steps if registry.plugin(s.workload).loads_data]
        will_init = bool(loads)
        regimes = sorted(
            {str(s.params["dataset"]) for s in loads if s.params.get("dataset") in REGIMES}
        )
        for target in self.targets:
            target.check(will_init=will_init)
            memory = target.planned().host.server_memory(None)
            if regimes and isinstance(memory, str):
                raise UsageError(f"--dataset {regimes[0]} on {target.name}: {memory}")

    def execute(self) -> RunResult:
        self.guard = SignalGuard(self.settings.observer, self.settings.cancel)
        total = len(self.steps) * len(self.targets)
        body = self._targets
        if self.until is not None:
            total = planned_steps(self.until[1], len(self.targets), self.until[0])
            body = self._interleaved
        return record_run(
            self.settings.store,
            self.guard,
            RunInfo(self.settings.plan_name, self.settings.label, total, len(self.targets)),
            self.check,
            body,
            clock=self.settings.clock,
        )

    def _targets(self, run_id: int) -> int:
        """Each target's session in turn; how many steps failed. A target that stops aside
        (StopsAside, Kubernetes) is stopped while the next one starts, and that stop has
        ended before the next target's first step; the next target's objects are made
        before its last step when both allow it (made_ahead)."""
        failed = 0
        sessions = self._sessions(run_id)
        aside: StoppingAside | None = None
        # made ahead, its session not opened yet (stopped twice when its opening fails:
        # stop() is idempotent)
        ahead: list[StartsAhead] = []
        try:
            for position, session in enumerate(sessions):
                following = sessions[position + 1] if position + 1 < len(sessions) else None
                try:
                    session.open()
                    ahead.clear()  # opened: its session closes it whatever happens
                    if aside is not None:
                        aside.wait()
                        aside = None
                    session.run_steps(self._maker(session, following, ahead))
                except BaseException:
                    session.close()
                    raise
                target = session.env.target
                if following is not None and aside_ok(target):
                    aside = session.close_aside()
                else:
                    session.close()
                failed += session.failed
        finally:
            if aside is not None:
                aside.wait()
            for made in ahead:
                self._stop_unopened(made)
        return failed

    def _maker(
        self, session: TargetSession, following: TargetSession | None, ahead: list[StartsAhead]
    ) -> Callable[[], None] | None:
        """What makes the next target's objects before this session's last step, if any."""
        if following is None:
            return None
        target = made_ahead(session.env.target, following.env.target)
        if target is None:
            return None

        def make() -> None:
            ahead.append(target)  # first: a Ctrl-C while it is made still removes it
            target.start_ahead()

        return make

    def _stop_unopened(self, target: StartsAhead) -> None:
        """Remove what a target made ahead left, when the run ended before it opened."""
        assert isinstance(target, Target)
        with self.guard.critical():
            try:
                target.stop()
            except Exception as exc:
                self.settings.observer.message(f"warning: stopping {target.name} failed: {exc}")

    def _interleaved(self, run_id: int) -> int:
        """Every target's session open at once, tests repeated in alternating rounds."""
        assert self.until is not None
        rule, blocks = self.until
        return InterleavedRun(self._sessions(run_id), blocks, rule, self.settings.observer).run()

    def _sessions(self, run_id: int) -> list[TargetSession]:
        """A session per target, none started yet."""
        total = len(self.steps) * len(self.targets)
        for target in self.targets:  # their directory locks say which run holds them
            if isinstance(target, HoldsDirectoryLock):
                target.note_run(run_id)
        sessions = []
        first_target: list[StepRecord] | None = None
        for position, target in enumerate(self.targets):
            previous: list[StepRecord] = []
            first_target = previous if first_target is None else first_target
            session = TargetSession(
                StepEnvironment(
                    run_id=run_id,
                    target=target,
                    host=target.host(),  # a pod's: as planned, until it runs
                    install=self.settings.install,
                    store=self.settings.store,
                    observer=self.settings.observer,
                    guard=self.guard,
                    previous=previous,
                    first_target=first_target,
                    clock=self.settings.clock,
                ),
                self.steps,
                first_index=position * len(self.steps),
                total_steps=total,
                sample_interval_s=self.sample_interval_s,
                extra_samplers=self.extra_samplers,
            )
            sessions.append(session)
        return sessions


def aside_ok(target: Target) -> bool:
    """Whether this target's stop may run beside the next target's start (StopsAside)."""
    return isinstance(target, StopsAside) and target.stops_aside()


def made_ahead(current: Target, following: Target) -> StartsAhead | None:
    """The next target, when its objects are made while `current` measures its last step
    (issue 34): both on Kubernetes (StopsAside, StartsAhead), and `current` stops aside (a
    drain that may have cordoned a node would have the next pod scheduled around it)."""
    if isinstance(following, StartsAhead) and aside_ok(current):
        return following
    return None


@dataclass(frozen=True)
class RunInfo:
    plan_name: str
    label: str | None
    steps: int  # in the whole run, for progress
    targets: int


def record_run(
    store: Store,
    guard: SignalGuard,
    info: RunInfo,
    check: Callable[[], None],
    body: Callable[[int], int],
    cleanup: Callable[[], None] = lambda: None,
    *,
    clock: Clock = SYSTEM_CLOCK,
) -> RunResult:
    """What every kind of run owes: validate before the run row exists, create it, run
    `body(run_id)` (which returns how many steps failed) under the signal handlers, and
    finish the row with the right status whatever happens (`cleanup` first). The one place
    that installs the signal handlers, for every kind of run."""
    with guard.installed():
        check()
        guard.check()
        run_id = store.create_run(
            info.plan_name,
            environment.capture(),
            clock.now(),
            label=info.label,
            writer=liveness.this_process().document(),
        )
        guard.observer.run_started(run_id, info.steps, info.targets)
        failed = 0
        status = "completed"
        try:
            failed = body(run_id)
        except Aborted as exc:
            status = "aborted"
            guard.observer.message(f"{exc.signal_name}: stopping, the completed steps are kept")
        except BaseException:
            status = "failed"  # a bug or an unexpected error: never leave it "completed"
            raise
        finally:
            guard.cleaning = True
            cleanup()
            if status != "aborted" and failed:
                status = "failed"
            store.finish_run(run_id, status, clock.now())
    return RunResult(run_id, status, failed)
