"""Executes the steps of a plan on each target, one target after the other.

Owns what must hold whatever happens: every finished step is committed to the store at once;
SIGINT/SIGTERM/SIGHUP stop the tool in flight and the server, remove what was created, and mark the
run aborted with its completed steps kept.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Protocol

from howfast import environment
from howfast.analysis.derive import derive_last
from howfast.errors import Aborted, HowfastError
from howfast.model import StepRecord, StepSpec, TargetRecord
from howfast.samplers.base import DEFAULT_INTERVAL_S
from howfast.samplers.session import TargetSampling
from howfast.store import liveness
from howfast.store.base import Store
from howfast.targets.base import Connection, Target
from howfast.targets.pgbin import PgInstall
from howfast.workloads import get_workload
from howfast.workloads.base import LoadedData, StepContext, StepOutcome, Workload


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class RunObserver(Protocol):
    """What the runner tells the user interface; the CLI draws progress from it."""

    def run_started(self, run_id: int, steps: int, targets: int) -> None: ...
    def step_started(
        self, index: int, target: Target, label: str, expected_s: float | None
    ) -> None: ...
    def step_progress(self, t: float, values: dict[str, float]) -> None: ...
    def step_finished(self, index: int, record: StepRecord) -> None: ...
    def message(self, text: str) -> None: ...


@dataclass
class RunResult:
    run_id: int
    status: str
    failed_steps: int


class _SignalGuard:
    """Turns the first SIGINT/SIGTERM/SIGHUP (a closed terminal) into Aborted in the main
    thread; later ones while cleaning up only say that cleanup is under way."""

    def __init__(self, observer: RunObserver) -> None:
        self.observer = observer
        self.cleaning = False
        self.received: str | None = None
        self.critical_depth = 0
        self.pending: str | None = None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.cleaning or self.received:
            self.observer.message(f"{name} received: still cleaning up, please wait")
            return
        if self.critical_depth:
            self.pending = name  # raised when the critical section ends
            return
        self.received = name
        raise Aborted(name)

    @contextlib.contextmanager
    def critical(self) -> Iterator[None]:
        """Defer the abort while stopping a server or writing a step: half of either would
        leave a process running or a step half-stored."""
        self.critical_depth += 1
        try:
            yield
        finally:
            self.critical_depth -= 1
        if not self.critical_depth and self.pending and not self.received:
            self.received, self.pending = self.pending, None
            raise Aborted(self.received)

    @contextlib.contextmanager
    def installed(self) -> Iterator[_SignalGuard]:
        signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        previous = {s: signal.getsignal(s) for s in signals}
        for s in previous:
            signal.signal(s, self.handler)
        try:
            yield self
        finally:
            for s, h in previous.items():
                signal.signal(s, h)


class Runner:
    def __init__(
        self,
        store: Store,
        targets: list[Target],
        steps: list[StepSpec],
        *,
        plan_name: str,
        install: PgInstall,
        observer: RunObserver,
        label: str | None = None,
        sample_interval_s: float | None = DEFAULT_INTERVAL_S,
    ) -> None:
        self.store = store
        self.targets = targets
        self.steps = steps
        self.plan_name = plan_name
        self.install = install
        self.observer = observer
        self.label = label
        self.cores = os.cpu_count() or 1
        self.guard = _SignalGuard(observer)
        # Steps stored so far, per target: later steps may build on them (rate curves).
        self.finished: dict[str, list[StepRecord]] = {}
        self.sample_interval_s = sample_interval_s  # None or 0: no sampling

    def check(self) -> None:
        """Validate every target before the run is created: bad input loses nothing."""
        will_init = any(s.workload == "pgbench-init" for s in self.steps)
        for target in self.targets:
            target.check(will_init=will_init)

    def execute(self) -> RunResult:
        guard = self.guard = _SignalGuard(self.observer)
        with guard.installed():
            self.check()
            run_id = self.store.create_run(
                self.plan_name,
                environment.capture(),
                now(),
                label=self.label,
                writer=liveness.this_process().document(),
            )
            self.observer.run_started(
                run_id, len(self.steps) * len(self.targets), len(self.targets)
            )
            failed = 0
            status = "completed"
            try:
                index = 0
                for target in self.targets:
                    self.store.add_target(run_id, TargetRecord(name=target.name, kind=target.kind))
                    failed += self._run_target(run_id, target, index)
                    index += len(self.steps)
            except Aborted as exc:
                status = "aborted"
                self.observer.message(f"{exc.signal_name}: stopping, the completed steps are kept")
            except BaseException:
                status = "failed"  # a bug or an unexpected error: never leave it "completed"
                raise
            finally:
                guard.cleaning = True
                if status != "aborted" and failed:
                    status = "failed"
                self.store.finish_run(run_id, status, now())
        return RunResult(run_id, status, failed)

    def _run_target(self, run_id: int, target: Target, first_index: int) -> int:
        """Run all steps on one target; return how many failed. Always stops the target."""
        failed = 0
        work_root = Path(tempfile.mkdtemp(prefix="howfast-work-", dir=_private_tmp()))
        try:
            try:
                connection = target.start()
                record = target.record()
                self.store.update_target(run_id, record)
            except (HowfastError, OSError) as exc:
                # The target never came up: its steps are recorded as failed with the reason.
                for offset, spec in enumerate(self.steps):
                    self._store_step(
                        run_id,
                        target,
                        spec,
                        first_index + offset,
                        StepOutcome(status="failed", error=str(exc)),
                        now(),
                    )
                return len(self.steps)
            for warning in getattr(target, "warnings", []):
                self.observer.message(f"warning: {warning}")
            sampling = TargetSampling(target, connection, self.sample_interval_s)
            in_force: dict[str, str] = {}  # the per-step settings applied to the server now
            for offset, spec in enumerate(self.steps):
                workload = get_workload(spec.workload)
                started = now()
                label = workload.label(spec.params)
                self.observer.step_started(first_index + offset, target, label, _expected(spec))
                step_dir = work_root / f"step-{offset + 1}"
                step_dir.mkdir()
                wanted = {str(k): str(v) for k, v in (spec.params.get("settings") or {}).items()}
                try:
                    refused = self._apply_step_settings(target, wanted, in_force)
                    in_force = {} if refused else wanted
                except HowfastError as exc:
                    in_force = {}  # a target that refused goes back to the plan's settings
                    outcome = StepOutcome(status="failed", error=str(exc))
                else:
                    outcome = self._execute(workload, spec, target, connection, step_dir, sampling)
                    if refused:
                        outcome.warnings.append(f"the step's settings were not applied: {refused}")
                        outcome.resolved_params["settings_applied"] = False
                if outcome.status == "failed":
                    failed += 1
                    if workload.needs_server:  # a failed fio probe owes nothing to the server
                        outcome.error = self._with_server_log(target, outcome.error)
                self._store_step(run_id, target, spec, first_index + offset, outcome, started)
            if in_force:  # a kept cluster keeps the plan's settings, not the last step's
                try:
                    target.apply_step_settings({})
                except HowfastError as exc:
                    self.observer.message(f"warning: {exc}")
        finally:
            with self.guard.critical():
                try:
                    target.stop()
                except Exception as exc:  # report, and still remove the work directory
                    self.observer.message(f"warning: stopping {target.name} failed: {exc}")
                shutil.rmtree(work_root, ignore_errors=True)
                kept = getattr(target, "kept_message", lambda: None)()
                if kept:
                    self.observer.message(kept)
        return failed

    def _execute(
        self,
        workload: Workload,
        spec: StepSpec,
        target: Target,
        connection: Connection | None,
        step_dir: Path,
        sampling: TargetSampling,
    ) -> StepOutcome:
        """One step with its samplers around it; they stop whatever happens."""
        ctx = StepContext(
            target=target,
            connection=connection,
            install=self.install,
            work_dir=step_dir,
            cores=self.cores,
            on_progress=self.observer.step_progress,
            previous=list(self.finished.get(target.name, [])),
        )
        try:  # before the samplers start, so that it is not measured (a cold restart...)
            prepared = workload.prepare(ctx, dict(spec.params))
        except HowfastError as exc:
            return StepOutcome(status="failed", error=str(exc))
        session = sampling.start(spec.workload)
        ctx.on_tool_started = session.track_process
        try:
            try:
                outcome = workload.execute(ctx, dict(spec.params))
            except HowfastError as exc:
                outcome = StepOutcome(status="failed", error=str(exc))
            except OSError as exc:  # the directory vanished, a full disk...: this step fails
                outcome = StepOutcome(status="failed", error=f"{workload.name} step: {exc}")
        finally:
            with self.guard.critical():  # a second Ctrl-C must not leave samplers running
                session.stop()
            shutil.rmtree(step_dir, ignore_errors=True)
        session.merge_into(outcome, _expected(spec))
        outcome.warnings[:0] = prepared.warnings
        outcome.resolved_params = {**prepared.resolved_params, **outcome.resolved_params}
        _note_loaded_data(spec, outcome, ctx.previous)
        return outcome

    def _apply_step_settings(
        self, target: Target, wanted: dict[str, str], in_force: dict[str, str]
    ) -> str | None:
        """The step's own settings (a plan's per-step `settings`), or the plan's again after
        a step that had some. Returns why not when the target keeps its own settings."""
        if wanted == in_force:
            return None
        return target.apply_step_settings(wanted)

    def _with_server_log(self, target: Target, error: str | None) -> str:
        text = error or "failed"
        if not target.alive():
            text += "\nthe server is not running any more"
        tail = target.server_log_tail(10)
        if tail:
            text += "\n--- server log (last lines) ---\n" + tail
        return text

    def _store_step(
        self,
        run_id: int,
        target: Target,
        spec: StepSpec,
        index: int,
        outcome: StepOutcome,
        started: str,
    ) -> None:
        params = dict(spec.params)
        if spec.repetition > 1 or "repetition" in params:
            params["repetition"] = spec.repetition
        record = StepRecord(
            target=target.name,
            workload=spec.workload,
            params=params,
            resolved=outcome.resolved_params,
            status=outcome.status,  # type: ignore[arg-type]
            started_at=started,
            finished_at=now(),
            metrics=outcome.metrics,
            warnings=outcome.warnings,
            error=outcome.error,
            series=outcome.series,
            histograms=outcome.histograms,
            sections=outcome.sections,
        )
        with self.guard.critical():
            record.id = self.store.add_step(run_id, record)
        self.finished.setdefault(target.name, []).append(record)
        self.observer.step_finished(index, derive_last(self.finished[target.name]))


def _note_loaded_data(spec: StepSpec, outcome: StepOutcome, previous: list[StepRecord]) -> None:
    """A step on pgbench's tables records the scale (and dataset) the target's latest load
    really loaded; whether its reads fit that regime is derived when the run is read."""
    loaded = LoadedData.last_on(previous)
    if loaded is None or spec.workload not in ("pgbench", "seqread"):
        return
    outcome.resolved_params.update(loaded.params())


def _expected(spec: StepSpec) -> float | None:
    from howfast.workloads.pgbench.build import expected_seconds

    return expected_seconds(spec.workload, spec.params)


def _private_tmp() -> str:
    """/dev/shm when usable: step logs stay off every disk."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
        return str(shm)
    return tempfile.gettempdir()
