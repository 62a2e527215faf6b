"""pg_test_fsync's part of reading a run (analysis/hooks.py): what its lines say of the
storage: the fdatasync rate beside fio's flush timing in the commit-rate ceiling
(analysis/probe.py), and each wal_sync_method's time for durability and advice."""

from __future__ import annotations

from howfast.analysis.hooks import Evidence, WorkloadAnalysis
from howfast.model import JSONValue, StepRecord
from howfast.walsync import WAL_SYNC_METHODS


def _num(value: JSONValue) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class PgTestFsyncAnalysis(WorkloadAnalysis):
    def evidence(self, step: StepRecord) -> Evidence | None:
        if step.status != "completed":
            return None
        m = step.metrics
        methods = {
            method: v
            for method in WAL_SYNC_METHODS
            if (v := _num(m.get(f"{method}_usecs"))) is not None
        }
        return Evidence(
            fsync_ops_s=_num(m.get("fdatasync_ops_s")),
            sync_method_us=methods,
            sync_source="pg_test_fsync",
        )


ANALYSIS = PgTestFsyncAnalysis()
