"""fio's part of reading a run (analysis/hooks.py): what makes a fio result not what it looks
like, and the commit-rate ceiling of a job that flushed every write, derived when a run is
read from the facts stored with the step; and what a job says of the storage (a flush's cost,
the most IOPS a throughput probe got) for the commit-rate ceiling and the `why` rules.

A step howfast ran records the facts in its resolved params (`fstype`, `direct_refused`,
`flushes_every_write`, `machine_memory_bytes`, `prefill_bytes`, `direct`); an imported step
has fio's own options as params (`direct`, `fsync`, `fdatasync`, `sync`, `gtod_reduce`). The
rules themselves are pure, in checks.py, which the executor applies as it runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from howfast.analysis.hooks import DeriveContext, Derived, Evidence, WorkloadAnalysis
from howfast.model import JSONValue, StepRecord
from howfast.walsync import commit_latency_ms
from howfast.workloads.fio.checks import (
    choose_direct,
    commit_metrics,
    flushes_every_write,
    imported_warnings,
    prefill_shortfall,
    run_warnings,
)

COMMIT_METRICS = frozenset({"commit_latency_ms", "commit_ceiling_tps"})
WAL_PROFILE = "wal-fsync"  # the profile made to time one WAL flush
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


def _num(value: JSONValue) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def throughput_probe(step: StepRecord) -> bool:
    """A profile that measures the most IOPS the storage gives: several I/Os in flight, no
    flush after each write (not wal-fsync, not queue depth 1)."""
    params = step.all_params
    if params.get("flushes_every_write") is True:
        return False
    depth = params.get("iodepth")
    if not isinstance(depth, int):
        found = re.search(r"qd(\d+)", str(params.get("profile") or ""))
        depth = int(found.group(1)) if found else None
    return depth is not None and depth > 1


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

    def evidence(self, step: StepRecord) -> Evidence | None:
        """A job that timed a sync after its writes: what one WAL flush costs (write + sync,
        walsync.commit_latency_ms); a throughput probe: the IOPS it got."""
        if step.status != "completed":
            return None
        m = step.metrics
        numbers = {k: v for k in m if (v := _num(m[k])) is not None}
        params = step.all_params
        iops = None
        if throughput_probe(step):
            iops = (_num(m.get("read_iops")) or 0.0) + (_num(m.get("write_iops")) or 0.0)
        flush_ms = commit_latency_ms(numbers)
        every_write = params.get("flushes_every_write") is True
        wal = params.get("profile") == WAL_PROFILE
        timed = "sync_lat_avg_ms" in m and flush_ms is not None
        return Evidence(
            times_flushes="sync_lat_avg_ms" in m,
            flush_ms=flush_ms,
            write_ms=_num(m.get("write_lat_avg_ms")),
            sync_ms=_num(m.get("sync_lat_avg_ms")),
            preferred_flush=wal,
            flush_source=f"fio {params.get('profile')}" if timed and (every_write or wal) else None,
            probe_iops=iops,
        )


ANALYSIS = FioAnalysis()
