"""pg_test_fsync's part of reading a run (analysis/hooks.py): what its fdatasync line says of
the storage, beside fio's flush timing in the commit-rate ceiling (analysis/probe.py)."""

from __future__ import annotations

from howfast.analysis.hooks import Evidence, WorkloadAnalysis
from howfast.model import StepRecord


class PgTestFsyncAnalysis(WorkloadAnalysis):
    def evidence(self, step: StepRecord) -> Evidence | None:
        value = step.metrics.get("fdatasync_ops_s")
        if step.status != "completed" or isinstance(value, bool):
            return None
        return Evidence(fsync_ops_s=float(value) if isinstance(value, int | float) else None)


ANALYSIS = PgTestFsyncAnalysis()
