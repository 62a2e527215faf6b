"""The toy's executor: one psql run on the step's host, `queries` timed sums of `rows`
numbers; a pure builder of the invocation and a pure parser of what psql printed."""

from __future__ import annotations

import re

from howfast.hosts.base import Invocation
from howfast.model import JSONValue
from howfast.targets.base import Connection
from howfast.workloads.base import (
    PlanContext,
    PlannedInvocation,
    StepContext,
    StepOutcome,
    Workload,
)
from tests.toy_workload.plan import PLUGIN

SCRIPT = "toy.sql"
_TIME = re.compile(r"^Time: ([0-9.]+) ms")


def script(rows: int, queries: int) -> str:
    """psql's input: timing on, then the same sum `queries` times."""
    query = f"SELECT sum(g) FROM generate_series(1, {rows}) g;\n"
    return "\\timing on\n" + query * queries


def invocation(psql: str, conn: Connection, rows: int, queries: int) -> Invocation:
    argv = (psql, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-f", SCRIPT)
    return Invocation(
        argv + tuple(conn.pgbench_args()),
        env=conn.options_env(),
        secret_env=conn.secret_env(),
        inputs={SCRIPT: script(rows, queries)},
        expected_s=1.0,
    )


def parse(stdout: str) -> tuple[list[float], list[int]]:
    """(each query's time in ms, each sum) from psql's output."""
    times, sums = [], []
    for line in stdout.splitlines():
        found = _TIME.match(line)
        if found:
            times.append(float(found.group(1)))
        elif line.strip().isdigit():
            sums.append(int(line.strip()))
    return times, sums


def _counts(params: dict[str, JSONValue]) -> tuple[int, int]:
    return int(params["rows"]), int(params["queries"])


class ToyWorkload(Workload):
    name = "toy"

    def label(self, params: dict[str, JSONValue]) -> str:
        return PLUGIN.label(params)

    def planned(self, ctx: PlanContext, params: dict[str, JSONValue]) -> list[PlannedInvocation]:
        assert ctx.connection is not None
        psql = ctx.host.program("psql") or "psql"
        return [PlannedInvocation(invocation(str(psql), ctx.connection, *_counts(params)))]

    def execute(self, ctx: StepContext, params: dict[str, JSONValue]) -> StepOutcome:
        psql = ctx.host.program("psql")
        if psql is None:
            return StepOutcome(status="failed", error="psql not found")
        rows, queries = _counts(params)
        result = ctx.run(invocation(str(psql), ctx.server(), rows, queries), track=True)
        if result.returncode != 0:
            return StepOutcome(status="failed", error=f"psql exited with {result.returncode}")
        times, sums = parse(result.stdout)
        expected = rows * (rows + 1) // 2
        if not times or any(s != expected for s in sums):
            return StepOutcome(status="failed", error=f"psql printed no sums of {expected}")
        return StepOutcome(
            metrics={"toy_query_ms": sum(times) / len(times), "toy_timed_queries": len(times)}
        )
