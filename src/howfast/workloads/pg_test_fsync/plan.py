"""The `pg_test_fsync` workload as a plan sees it: PostgreSQL's probe of how fast each
wal_sync_method makes a write durable, on the storage under test."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from howfast.metric import Metric
from howfast.model import JSONValue, StepSpec
from howfast.plugin.fields import PositiveInt
from howfast.plugin.workload import ExpandContext, Program, StepModel, WorkloadPlugin

TESTS = 16  # pg_test_fsync runs about this many tests of `seconds` each


class PgTestFsyncStep(StepModel):
    """pg_test_fsync: how fast each wal_sync_method makes a write durable."""

    workload: Literal["pg_test_fsync"]
    seconds: PositiveInt = 5


class PgTestFsyncPlugin(WorkloadPlugin[PgTestFsyncStep]):
    name = "pg_test_fsync"
    model = PgTestFsyncStep
    order = 40
    executor_class = "howfast.workloads.pg_test_fsync.workload:PgTestFsyncWorkload"
    test_params = ("seconds",)
    other_params = ("pg_version",)
    needs_server = False
    io_by_server = False  # pg_test_fsync writes its own file
    analysis = "howfast.workloads.pg_test_fsync.analysis:ANALYSIS"
    report = "howfast.workloads.pg_test_fsync.report:REPORT"
    programs = (
        Program("pg_test_fsync", "postgres", "the fsync method comparison of `howfast probe`"),
    )
    metrics = (Metric("fdatasync_ops_s", "fdatasync", "ops/s", True, 0),)
    key_metrics = ("fdatasync_ops_s",)
    headline_metrics = ("fdatasync_ops_s",)

    def expand(self, step: PgTestFsyncStep, ctx: ExpandContext) -> list[StepSpec]:
        return ctx.repeated("pg_test_fsync", seconds=step.seconds)

    def label(self, params: Mapping[str, JSONValue]) -> str:
        return f"pg_test_fsync, {params.get('seconds')} s per test"

    def expected_seconds(self, params: Mapping[str, JSONValue]) -> float | None:
        seconds = params.get("seconds")
        return TESTS * float(seconds) if isinstance(seconds, int | float) else None


PLUGIN = PgTestFsyncPlugin()
