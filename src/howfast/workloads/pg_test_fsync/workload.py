"""Executor for pg_test_fsync, PostgreSQL's own probe of its WAL sync methods.

The argv and the parser live in parse.py. The program runs on a file in the
target's scratch directory (on the storage under test), with LC_ALL=C so that its output is
the English the parser reads. Where it is not installed the step is skipped, not failed: the
fio probes say most of the same thing.
"""

from __future__ import annotations

from pathlib import Path

from howfast.hosts.base import Invocation
from howfast.machine.pgbin import INSTALL_HINT
from howfast.model import JSONValue
from howfast.plugin.registry import expected_seconds
from howfast.targets.capabilities import HasStorage
from howfast.workloads.base import (
    PlanContext,
    PlannedInvocation,
    StepContext,
    StepOutcome,
    Workload,
)
from howfast.workloads.fio.checks import memory_fs_warning
from howfast.workloads.fio.workload import MIB, error_tail, space_problem, ticking
from howfast.workloads.pg_test_fsync import parse, plan

TEST_FILE_NAME = "howfast-pg_test_fsync.dat"
FILE_BYTES = 16 * MIB  # pg_test_fsync writes one WAL segment's worth


def fsync_invocation(program: str, scratch: Path, seconds: int) -> Invocation:
    """pg_test_fsync on a file in the scratch directory, in English for the parser."""
    return Invocation(
        tuple(parse.build_argv(program, scratch / TEST_FILE_NAME, seconds)),
        env={"LC_ALL": "C"},
        expected_s=expected_seconds("pg_test_fsync", {"seconds": seconds}),
    )


class PgTestFsyncWorkload(Workload):
    name = "pg_test_fsync"
    needs_server = False

    def label(self, params: dict[str, JSONValue]) -> str:
        return plan.PLUGIN.label(params)

    def execute(self, ctx: StepContext, params: dict[str, JSONValue]) -> StepOutcome:
        seconds = int(params.get("seconds") or 5)
        scratch = ctx.target.scratch_dir() if isinstance(ctx.target, HasStorage) else None
        if scratch is None:
            return StepOutcome(
                status="skipped",
                error=f"{ctx.target.name} has no directory on the storage under test "
                "(an existing server): pg_test_fsync needs one",
            )
        program = ctx.host.program("pg_test_fsync")
        if program is None:
            return StepOutcome(
                status="skipped",
                error=f"pg_test_fsync not found in {ctx.install.bindir} ({INSTALL_HINT})",
            )
        problem = space_problem(scratch, FILE_BYTES, ctx.host.free_bytes(scratch))
        if problem:
            return StepOutcome(status="failed", error=problem)
        try:
            with ticking(ctx.on_progress):
                result = ctx.run(fsync_invocation(program, scratch, seconds))
        finally:
            # pg_test_fsync removes its file when it ends, but not when it is killed.
            ctx.host.remove_file(scratch / TEST_FILE_NAME)
        resolved: dict[str, JSONValue] = {"pg_version": ctx.install.version}
        if result.returncode != 0:
            error = error_tail(result, "pg_test_fsync")
            return StepOutcome(status="failed", error=error, resolved_params=resolved)
        try:
            tests = parse.parse(result.stdout)
        except ValueError:
            error = error_tail(result, "pg_test_fsync") + "\n(it printed no results)"
            return StepOutcome(status="failed", error=error, resolved_params=resolved)
        warning = memory_fs_warning(scratch.parent, ctx.host.fstype(scratch))
        return StepOutcome(
            metrics=dict(parse.metrics(tests)),
            warnings=(warning,) if warning else (),
            resolved_params=resolved,
        )

    def planned(self, ctx: PlanContext, params: dict[str, JSONValue]) -> list[PlannedInvocation]:
        if ctx.scratch_dir is None:
            return [PlannedInvocation(None, "skipped: the target has no directory for it")]
        program = ctx.host.program("pg_test_fsync") or "pg_test_fsync"
        seconds = int(params.get("seconds") or 5)
        return [PlannedInvocation(fsync_invocation(program, ctx.scratch_dir, seconds))]
