"""The toy workload as a plan sees it: `rows` (one count or a list: a test per count) and
`queries`, the params that make two of its steps different tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from howfast.metric import Metric
from howfast.model import JSONValue, StepSpec
from howfast.plugin.fields import PositiveInt, one_or_list
from howfast.plugin.workload import (
    ExpandContext,
    Program,
    StepFamily,
    StepModel,
    WorkloadPlugin,
)

Rows = Annotated[list[PositiveInt], BeforeValidator(one_or_list), Field(min_length=1)]


class ToyStep(StepModel):
    """toy: sum `rows` numbers, `queries` times, and time each sum."""

    workload: Literal["toy"]
    rows: Rows
    queries: PositiveInt = 20


def _rows_per_second(metrics: Mapping[str, JSONValue]) -> list[tuple[str, float | None]]:
    value = metrics.get("toy_rows_per_s")
    return [("", float(value) if isinstance(value, int | float) else None)]


class ToyPlugin(WorkloadPlugin[ToyStep]):
    name = "toy"
    model = ToyStep
    order = 60
    test_params = ("rows", "queries")
    other_params = ("psql_version",)
    sampled = True  # the samplers watch its steps (CPU, disks, PostgreSQL's views)
    client_side = True  # psql is a database client
    metrics = (
        Metric("toy_query_ms", "query time", "ms", False, 3),
        Metric("toy_rows_per_s", "rows summed", "rows/s", True, 0),
        Metric("toy_timed_queries", "timed queries", "", None, 0),
    )
    key_metrics = ("toy_rows_per_s", "toy_query_ms")
    headline_metrics = ("toy_rows_per_s",)
    prometheus = (
        StepFamily(
            "step_toy_rows_per_second",
            "Rows the toy workload summed per second over the finished step.",
            None,
            _rows_per_second,
        ),
    )
    # The program it runs: `howfast doctor` checks it, `cleanup` finds it in a step's work
    # directory, and doctor's install commands name these packages when it is missing.
    programs = (
        Program(
            "psql",
            "postgres",
            "the toy workload",
            packages={"debian": ("postgresql-client",), "rhel": ("postgresql",)},
        ),
    )
    executor_class = "tests.toy_workload.workload:ToyWorkload"
    analysis = "tests.toy_workload.analysis:ANALYSIS"
    report = "tests.toy_workload.report:REPORT"

    def expand(self, step: ToyStep, ctx: ExpandContext) -> list[StepSpec]:
        return [
            spec
            for rows in step.rows
            for spec in ctx.repeated("toy", rows=rows, queries=step.queries)
        ]

    def label(self, params: Mapping[str, JSONValue]) -> str:
        return f"toy: {params.get('queries')} sums of {params.get('rows')} rows"

    def short_label(self, params: Mapping[str, JSONValue]) -> str:
        return f"toy {params.get('rows')} rows"

    def prometheus_labels(self, params: Mapping[str, JSONValue]) -> tuple[str, str]:
        return (f"{params.get('rows')} rows", "")

    def progress_summary(self, metrics: Mapping[str, JSONValue]) -> list[str]:
        value = metrics.get("toy_query_ms")
        return [f"{float(value):.3f} ms per sum"] if isinstance(value, int | float) else []

    def expected_seconds(self, params: Mapping[str, JSONValue]) -> float | None:
        return 1.0


PLUGIN = ToyPlugin()
