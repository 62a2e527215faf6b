"""The toy's part of reading a run: rows summed per second, from the time of a sum."""

from __future__ import annotations

from collections.abc import Sequence

from howfast.analysis.hooks import NOTHING_DERIVED, DeriveContext, Derived, WorkloadAnalysis
from howfast.model import StepRecord


class ToyAnalysis(WorkloadAnalysis):
    def derive_step(
        self, step: StepRecord, before: Sequence[StepRecord], ctx: DeriveContext
    ) -> Derived:
        query_ms = step.metrics.get("toy_query_ms")
        rows, queries = step.all_params.get("rows"), step.all_params.get("queries")
        timed = step.metrics.get("toy_timed_queries")
        if step.status != "completed" or not isinstance(query_ms, int | float) or query_ms <= 0:
            return NOTHING_DERIVED
        warnings: tuple[str, ...] = ()
        if isinstance(timed, int) and isinstance(queries, int) and timed < queries:
            warnings = (f"only {timed} of the {queries} sums were timed",)
        rate = float(rows) / (query_ms / 1000) if isinstance(rows, int) else None
        return Derived(metrics={"toy_rows_per_s": rate} if rate else {}, warnings=warnings)


ANALYSIS = ToyAnalysis()
