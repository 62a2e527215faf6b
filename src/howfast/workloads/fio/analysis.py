"""fio's part of reading a run (analysis/hooks.py): what makes a fio result not what it looks
like, and the commit-rate ceiling of a job that flushed every write, derived when a run is
read from the facts stored with the step.

A step howfast ran records the facts in its resolved params (`fstype`, `direct_refused`,
`flushes_every_write`, `machine_memory_bytes`, `prefill_bytes`, `direct`); an imported step
has fio's own options as params (`direct`, `fsync`, `fdatasync`, `sync`, `gtod_reduce`). The
rules themselves are pure, in checks.py, which the executor applies as it runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from howfast.analysis.hooks import DeriveContext, Derived, WorkloadAnalysis
from howfast.model import JSONValue, StepRecord
from howfast.workloads.fio.checks import (
    choose_direct,
    commit_metrics,
    flushes_every_write,
    imported_warnings,
    prefill_shortfall,
    run_warnings,
)

COMMIT_METRICS = frozenset({"commit_latency_ms", "commit_ceiling_tps"})
_OPTION_PARAMS = ("fsync", "fdatasync", "sync", "gtod_reduce")


def ran_by_howfast(params: Mapping[str, JSONValue]) -> bool:
    """Whether the step has the facts howfast records when it runs fio (since schema 4)."""
    return "fstype" in params


def options_of(params: Mapping[str, JSONValue]) -> dict[str, str]:
    """fio's options as far as the params tell them."""
    options = {"direct": "1" if params.get("direct") is True else "0"}
    if params.get("flushes_every_write") is True:
        options["fdatasync"] = "1"
    for key in _OPTION_PARAMS:
        if params.get(key) is not None:
            options[key] = str(params[key])
    return options


def fio_warnings(step: StepRecord, imported: bool) -> list[str]:
    params = step.all_params
    size = params.get("size_bytes")
    size_bytes = int(size) if isinstance(size, int) else 0
    if ran_by_howfast(params):
        fstype = str(params["fstype"]) if params.get("fstype") else None
        memory = params.get("machine_memory_bytes")
        found = run_warnings(
            directory=step.target,
            fstype=fstype,
            choice=choose_direct(fstype, params.get("direct_refused") is True),
            options=options_of(params),
            size_bytes=size_bytes,
            memory_bytes=memory if isinstance(memory, int) else None,
        )
        written = params.get("prefill_bytes")
        prefill = prefill_shortfall(written if isinstance(written, int) else None, size_bytes)
        return found + ([prefill] if prefill else [])
    if imported:
        return imported_warnings(options_of(params))
    return []


def fio_commit_metrics(step: StepRecord, imported: bool) -> dict[str, JSONValue] | None:
    """commit_latency_ms and commit_ceiling_tps; None when it cannot be told whether the job
    flushed every write (a step stored by an older howfast)."""
    params = step.all_params
    if not (ran_by_howfast(params) or imported):
        return None
    if not flushes_every_write(options_of(params)):
        return {}
    numbers = {
        k: float(v)
        for k, v in step.metrics.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    return dict(commit_metrics(numbers))


class FioAnalysis(WorkloadAnalysis):
    def derive_step(
        self, step: StepRecord, before: Sequence[StepRecord], ctx: DeriveContext
    ) -> Derived:
        commit = fio_commit_metrics(step, ctx.imported)
        judged = step.status == "completed" or ctx.imported
        return Derived(
            metrics=commit or {},
            owned=COMMIT_METRICS if commit is not None else frozenset(),  # None: cannot tell
            warnings=tuple(fio_warnings(step, ctx.imported)) if judged else (),
        )


ANALYSIS = FioAnalysis()
