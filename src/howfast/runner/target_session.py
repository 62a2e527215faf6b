"""A target session: start the target, apply per-step settings, run its steps in order, and
stop it whatever happens. Self-contained, so that a later fleet can run several side by side.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from howfast.clock import now
from howfast.errors import HowfastError
from howfast.model import StepSpec, TargetRecord
from howfast.runner.observer import StepRef
from howfast.runner.step import StepEnvironment, execute_step, expected, store_step
from howfast.samplers.session import SamplerFactory, TargetSampling
from howfast.targets.base import Connection
from howfast.workloads import get_workload
from howfast.workloads.base import StepOutcome


class TargetSession:
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

    def _ref(self, offset: int, label: str) -> StepRef:
        spec = self.steps[offset]
        return StepRef(
            self.first_index + offset,
            self.total_steps,
            self.env.target.name,
            label,
            spec.workload,
            spec.params,
        )

    def run(self) -> int:
        """Run every step; return how many failed. Always stops the target."""
        env = self.env
        target = env.target
        env.store.add_target(env.run_id, TargetRecord(name=target.name, kind=target.kind))
        work_root = Path(tempfile.mkdtemp(prefix="howfast-work-", dir=private_tmp()))
        try:
            try:
                connection = target.start()
                env.store.update_target(env.run_id, target.record())
            except (HowfastError, OSError) as exc:
                # The target never came up: its steps are recorded as failed with the reason.
                for offset, spec in enumerate(self.steps):
                    label = get_workload(spec.workload).label(spec.params)
                    outcome = StepOutcome(status="failed", error=str(exc))
                    store_step(env, spec, self._ref(offset, label), outcome, now())
                return len(self.steps)
            for warning in getattr(target, "warnings", []):
                env.observer.message(f"warning: {warning}")
            sampling = TargetSampling(
                target, connection, self.sample_interval_s, env.host, self.extra_samplers
            )
            self._steps(connection, sampling, work_root)
        finally:
            self._stop(work_root)
        return self.failed

    def _steps(
        self, connection: Connection | None, sampling: TargetSampling, work_root: Path
    ) -> None:
        env = self.env
        target = env.target
        in_force: dict[str, str] = {}  # the per-step settings applied to the server now
        for offset, spec in enumerate(self.steps):
            workload = get_workload(spec.workload)
            started = now()
            ref = self._ref(offset, workload.label(spec.params))
            env.observer.step_started(ref, expected(spec))
            step_dir = work_root / f"step-{offset + 1}"
            step_dir.mkdir()
            wanted = {str(k): str(v) for k, v in (spec.params.get("settings") or {}).items()}
            try:
                refused = None if wanted == in_force else target.apply_step_settings(wanted)
                in_force = {} if refused else wanted
            except HowfastError as exc:
                in_force = {}  # a target that refused goes back to the plan's settings
                outcome = StepOutcome(status="failed", error=str(exc))
            else:
                outcome = execute_step(env, workload, spec, ref, connection, step_dir, sampling)
                if refused:
                    outcome.warnings.append(f"the step's settings were not applied: {refused}")
                    outcome.resolved_params["settings_applied"] = False
            if outcome.status == "failed":
                self.failed += 1
                if workload.needs_server:  # a failed fio probe owes nothing to the server
                    outcome.error = self._with_server_log(outcome.error)
            store_step(env, spec, ref, outcome, started)
        if in_force:  # a kept cluster keeps the plan's settings, not the last step's
            try:
                target.apply_step_settings({})
            except HowfastError as exc:
                env.observer.message(f"warning: {exc}")

    def _with_server_log(self, error: str | None) -> str:
        target = self.env.target
        text = error or "failed"
        if not target.alive():
            text += "\nthe server is not running any more"
        tail = target.server_log_tail(10)
        if tail:
            text += "\n--- server log (last lines) ---\n" + tail
        return text

    def _stop(self, work_root: Path) -> None:
        env = self.env
        with env.guard.critical():
            try:
                env.target.stop()
            except Exception as exc:  # report, and still remove the work directory
                env.observer.message(f"warning: stopping {env.target.name} failed: {exc}")
            shutil.rmtree(work_root, ignore_errors=True)
            kept = getattr(env.target, "kept_message", lambda: None)()
            if kept:
                env.observer.message(kept)


def private_tmp() -> str:
    """/dev/shm when usable: step logs stay off every disk."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
        return str(shm)
    return tempfile.gettempdir()
