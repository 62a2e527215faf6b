"""A target session: start the target, apply per-step settings, run its steps, and stop it
whatever happens. Self-contained, so that several can be open side by side (an interleaved
`--until` run alternates steps between them).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from howfast.analysis.memory_storage import memory_storage_warning
from howfast.errors import HowfastError
from howfast.model import JSONValue, StepRecord, StepSpec, TargetRecord
from howfast.observer import StepRef
from howfast.runner.aside import StoppingAside
from howfast.runner.step import (
    StepEnvironment,
    execute_step,
    expected,
    follows_failover,
    store_step,
    unloaded_reason,
)
from howfast.runner.trials import trial_line
from howfast.samplers.session import SamplerFactory, TargetSampling
from howfast.targets.base import Connection, Target
from howfast.targets.capabilities import (
    AppliesStepSettings,
    HasCurrentPrimary,
    HasServerLog,
    Keepable,
    Promotable,
    keeps_own_settings,
)
from howfast.targets.leftovers.marks import write_owner
from howfast.workloads import get_workload
from howfast.workloads.base import StepOutcome


class TargetSession:
    """One target's part of a run, in three moves: `open` (start the target), `run_step` (one
    step on it, committed at once), `close` (stop it, whatever happened). `run` makes them in
    order for a plan's steps; an interleaved run (runner/interleaved.py) keeps several
    sessions open and alternates steps between them."""

    def __init__(
        self,
        env: StepEnvironment,
        steps: list[StepSpec],
        *,
        first_index: int,
        total_steps: int,
        sample_interval_s: float | None,
        extra_samplers: Sequence[SamplerFactory] = (),
    ) -> None:
        self.env = env
        self.extra_samplers = extra_samplers
        self.steps = steps
        self.first_index = first_index
        self.total_steps = total_steps
        self.sample_interval_s = sample_interval_s
        self.failed = 0
        self.start_error: str | None = None  # why the target did not come up
        self.in_force: dict[str, str] = {}  # the per-step settings applied to the server now
        self.connection: Connection | None = None
        self.sampling: TargetSampling | None = None
        self.work_root: Path | None = None
        self.ran = 0  # steps run, for their work directories' names
        # Why the later steps cannot measure the design asked (a failover that could not be
        # undone): they are skipped with it.
        self.design_lost: str | None = None
        # The last rebuild of the design after a failover (what the target did): the later
        # steps carry it in `resolved.design_restored`.
        self.design_restored: dict[str, JSONValue] | None = None
        self.restore_pending = False  # a failover ran: the design is rebuilt before a next step

    def _ref(self, spec: StepSpec, index: int, total: int) -> StepRef:
        label = get_workload(spec.workload).label(spec.params)
        return StepRef(index, total, self.env.target.name, label, spec.workload, spec.params)

    def run(self) -> int:
        """Run every step; return how many failed. Always stops the target."""
        try:
            self.open()
            self.run_steps()
        finally:
            self.close()
        return self.failed

    def run_steps(self, before_last: Callable[[], None] | None = None) -> None:
        """Every step of the plan, in order, on the opened target; `before_last` is called
        before the last one (the runner makes the next target's pod then)."""
        for offset, spec in enumerate(self.steps):
            if before_last is not None and offset == len(self.steps) - 1:
                before_last()
            self.run_step(spec, self.first_index + offset, self.total_steps)

    def open(self) -> bool:
        """Start the target; False (and `start_error`) when it did not come up: its steps are
        then recorded as failed with the reason."""
        env = self.env
        target = env.target
        env.store.add_target(env.run_id, TargetRecord(name=target.name, kind=target.kind))
        self.work_root = new_work_root()
        try:
            self.connection = target.start()
            record = target.record()
            env.store.update_target(env.run_id, record)
        except (HowfastError, OSError) as exc:
            self.start_error = str(exc)
            return False
        env.host = target.host()  # a pod's host is known once the pod runs
        in_memory = memory_storage_warning(record)  # the steps carry it when the run is read
        for warning in [*target.start_warnings(), *([in_memory] if in_memory else [])]:
            env.observer.message(f"warning: {warning}")
        self.sampling = TargetSampling(
            target, self.connection, self.sample_interval_s, env.host, self.extra_samplers
        )
        return True

    def run_step(self, spec: StepSpec, index: int, total: int) -> StepRecord:
        """One step (number `index` of `total` in the run, for progress), stored at once; a
        trial (--trials) then says its figures in a line of its own."""
        record = self._run_step(spec, index, total)
        line = trial_line(record)
        if line is not None:
            self.env.observer.message(line)
        return record

    def _run_step(self, spec: StepSpec, index: int, total: int) -> StepRecord:
        env = self.env
        target = env.target
        workload = get_workload(spec.workload)
        env.guard.check()  # a run stopped from another thread ends here, between steps
        if self.restore_pending and self.sampling is not None:
            self._restore_design()
        started = env.clock.now()
        ref = self._ref(spec, index, total)
        if self.sampling is None or self.work_root is None:
            self.failed += 1
            outcome = StepOutcome(status="failed", error=self.start_error or "not started")
            return store_step(env, spec, ref, outcome, started)
        env.observer.step_started(ref, expected(spec))
        unloaded = unloaded_reason(spec, env.previous, env.numbers) or self.design_lost
        if unloaded is not None:  # skipped, not failed: the failure is the load's
            return store_step(
                env, spec, ref, StepOutcome(status="skipped", error=unloaded), started
            )
        self.ran += 1
        step_dir = self.work_root / f"step-{self.ran}"
        step_dir.mkdir()
        wanted = {str(k): str(v) for k, v in (spec.params.get("settings") or {}).items()}
        try:
            refused = None if wanted == self.in_force else apply_settings(target, wanted)
            self.in_force = {} if refused else wanted
        except HowfastError as exc:
            self.in_force = {}  # a target that refused goes back to the plan's settings
            outcome = StepOutcome(status="failed", error=str(exc))
        else:
            outcome = execute_step(
                env, workload, spec, ref, self.connection, step_dir, self.sampling
            )
            if refused:
                outcome = outcome.with_warning(
                    f"the step's settings were not applied: {refused}"
                ).with_resolved({"settings_applied": False})
        if self.design_restored is not None:
            outcome = outcome.with_resolved({"design_restored": self.design_restored})
        if outcome.status == "failed":
            self.failed += 1
            if workload.needs_server:  # a failed fio probe owes nothing to the server
                outcome = outcome.with_error(self._with_server_log(outcome.error))
        record = store_step(env, spec, ref, outcome, started)
        if follows_failover(spec) and isinstance(target, Promotable):
            self.restore_pending = True  # before the next step, if any: unmeasured
        return record

    def _restore_design(self) -> None:
        """After a step with a failover, the design asked back for the next steps (unmeasured),
        or the reason why not, which the next steps are skipped with."""
        self.restore_pending = False
        target = self.env.target
        if not isinstance(target, Promotable) or self.design_lost is not None:
            return
        try:
            restored = target.restore_design()
        except (HowfastError, OSError) as exc:
            self.design_lost = f"not run: {exc}"
            self.env.observer.message(f"warning: {target.name}: {exc}")
            return
        if restored is None:
            return
        self.design_restored = dict(restored)
        self.env.observer.message(
            f"{target.name}: the design rebuilt after the failover in {restored.get('seconds')} s "
            f"({restored.get('standby')} made again from the promoted {restored.get('primary')})"
        )
        warnings = restored.get("warnings")  # what went wrong without undoing the rebuild
        for warning in warnings if isinstance(warnings, list) else []:
            self.env.observer.message(f"warning: {target.name}: {warning}")
        # the primary moved: howfast's connection and the devices sampled follow it
        if isinstance(target, HasCurrentPrimary):
            self.connection = target.connection_now()
        if self.sampling is not None:
            self.sampling.close()
        self.sampling = TargetSampling(
            target, self.connection, self.sample_interval_s, self.env.host, self.extra_samplers
        )

    def close(self) -> None:
        """Put back the plan's settings and stop the target; safe to call at any point."""
        if self.work_root is None:
            return
        self._put_back_settings()
        work_root, self.work_root = self.work_root, None
        self._stop(work_root)

    def close_aside(self) -> StoppingAside:
        """close(), with the target's stop in a thread of its own (a StopsAside target): the
        caller starts the next target meanwhile, and waits for this stop before that one's
        first step."""
        if self.work_root is None:
            return StoppingAside(list, self.env.observer)
        self._put_back_settings()
        work_root, self.work_root = self.work_root, None
        return StoppingAside(lambda: self._stopped(work_root), self.env.observer)

    def _put_back_settings(self) -> None:
        if self.in_force and self.sampling is not None:
            # a kept cluster keeps the plan's settings, not the last step's
            try:
                apply_settings(self.env.target, {})
            except HowfastError as exc:
                self.env.observer.message(f"warning: {exc}")
            self.in_force = {}

    def _with_server_log(self, error: str | None) -> str:
        target = self.env.target
        text = error or "failed"
        if not isinstance(target, HasServerLog):
            return text
        if not target.alive():
            text += "\nthe server is not running any more"
        tail = target.server_log_tail(10)
        if tail:
            text += "\n--- server log (last lines) ---\n" + tail
        return text

    def _stop(self, work_root: Path) -> None:
        env = self.env
        with env.guard.critical():
            for message in self._stopped(work_root):
                env.observer.message(message)

    def _stopped(self, work_root: Path) -> list[str]:
        """Stop the target and remove the work directory; what to tell the user."""
        target = self.env.target
        messages = []
        if self.sampling is not None:  # its kept connections, before the server goes
            self.sampling.close()
        try:
            target.stop()
        except Exception as exc:  # report, and still remove the work directory
            messages.append(f"warning: stopping {target.name} failed: {exc}")
        shutil.rmtree(work_root, ignore_errors=True)
        kept = target.kept_message() if isinstance(target, Keepable) else None
        if kept:
            messages.append(kept)
        return messages


def apply_settings(target: Target, settings: dict[str, str]) -> str | None:
    """The step's settings in force on the server; why not, for a target that keeps its own."""
    if not isinstance(target, AppliesStepSettings):
        return keeps_own_settings(target)
    target.apply_step_settings(settings)
    return None


def new_work_root() -> Path:
    """A private directory for the steps' files, named with this process's PID and carrying
    its owner record: what a SIGKILLed howfast leaves there says whose it was (howfast
    cleanup removes it once that process is gone)."""
    path = Path(tempfile.mkdtemp(prefix=f"howfast-work-{os.getpid()}-", dir=private_tmp()))
    write_owner(path)
    return path


def private_tmp() -> str:
    """/dev/shm when usable: step logs stay off every disk."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
        return str(shm)
    return tempfile.gettempdir()
