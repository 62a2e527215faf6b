"""Turning tool output produced elsewhere into a stored run: pgbench (one or two steps) and
fio (one step per measured job)."""

from __future__ import annotations

import os

from howfast.errors import UsageError
from howfast.model import JSONValue, Sample, StepRecord, TargetRecord
from howfast.plans.model import duration_seconds, size_bytes
from howfast.runner import now
from howfast.store.base import Store
from howfast.workloads.fio import parse as fio_parse
from howfast.workloads.fio.workload import histograms_us, job_metrics
from howfast.workloads.pgbench import parse

# fio job options kept as step params, under their fio names: what the job did.
FIO_PARAM_OPTIONS = (
    "rw",
    "rwmixread",
    "bs",
    "iodepth",
    "numjobs",
    "ioengine",
    "fsync",
    "fdatasync",
    "sync",
    "gtod_reduce",  # whether latencies were timed: a trust warning is derived from it
)


def pgbench_run_params(run: parse.PgbenchRun) -> dict[str, JSONValue]:
    """The params the output states, under the same names `howfast run` uses."""
    candidates: dict[str, JSONValue] = {
        "mode": run.mode,
        "script": run.script,
        "clients": run.clients,
        "jobs": run.threads,
        "duration_s": run.duration_s,
        "transactions": run.transactions_per_client,
        "scale": run.scale,
        "protocol": run.query_mode,
        "latency_limit_ms": run.latency_limit_ms,
    }
    return {k: v for k, v in candidates.items() if v is not None}


def import_pgbench_text(store: Store, text: str, *, source_name: str, label: str | None) -> int:
    init, run = parse.parse_any(text)
    if init is None and run is None:
        raise UsageError(
            f"{source_name}: no pgbench output found (expected the summary pgbench prints, "
            "e.g. 'tps = ...' or 'done in ... s')"
        )
    target = label or source_name
    started = now()
    run_id = store.create_run("import", {"imported_from": source_name}, started, label=label)
    version = (run.version if run else None) or (init.version if init else None)
    store.add_target(run_id, TargetRecord(name=target, kind="import", pg_version=version))
    status = "completed"
    if init is not None:
        init_metrics: dict[str, JSONValue] = dict(init.metrics())
        failed = bool(init.errors)
        store.add_step(
            run_id,
            StepRecord(
                target=target,
                workload="pgbench-init",
                params={"scale": init.scale} if init.scale else {},
                status="failed" if failed else "completed",
                started_at=started,
                finished_at=started,
                metrics=init_metrics,
                error="\n".join(init.errors) or None,
            ),
        )
        status = "failed" if failed else status
    if run is not None:
        failed = run.aborted or "tps" not in run.metrics()
        series = {
            "tps": [Sample(p.t, p.tps) for p in run.progress],
            "latency_ms": [Sample(p.t, p.latency_ms) for p in run.progress],
        }
        store.add_step(
            run_id,
            StepRecord(
                target=target,
                workload="pgbench",
                params=pgbench_run_params(run),
                status="failed" if failed else "completed",
                started_at=started,
                finished_at=started,
                metrics=dict(run.metrics()),
                error="\n".join(run.errors) or None,
                series={k: v for k, v in series.items() if v},
            ),
        )
        status = "failed" if failed else status
    store.finish_run(run_id, status, now())
    return run_id


def fio_job_params(job: fio_parse.FioJob, fio_version: str) -> dict[str, JSONValue]:
    """A fio job's params under the names `howfast probe` uses (profile, size_bytes,
    runtime_s, direct, ioengine, fio_version) plus the options that say what it did."""
    options = job.options
    params: dict[str, JSONValue] = {"profile": job.name}
    size = _fio_size(options.get("size"))
    if size is not None:
        params["size_bytes"] = size
    runtime = _fio_seconds(options.get("runtime"))
    if runtime is not None:
        params["runtime_s"] = runtime
    params["direct"] = options.get("direct") == "1"  # fio's default is buffered
    for key in FIO_PARAM_OPTIONS:
        if key in options:
            value = options[key]
            params[key] = int(value) if value.isdigit() else value
    params["fio_version"] = fio_version
    return params


def _fio_size(text: str | None) -> int | None:
    """fio sizes ("32m", "1g", "33554432") are binary multiples, as howfast's are; a
    percentage of a device ("50%") has no size in bytes."""
    try:
        return size_bytes(text) if text else None
    except ValueError:
        return None


def _fio_seconds(text: str | None) -> int | None:
    try:
        return round(duration_seconds(text)) if text else None
    except ValueError:
        return None


def import_fio_text(store: Store, text: str, *, source_name: str, label: str | None) -> int:
    """Store fio's JSON output (json or json+, any fio 2.x/3.x) as a run with one step per
    measured job; howfast's own unmeasured prefill job is left out."""
    try:
        result = fio_parse.parse_output(text)
    except ValueError:
        raise UsageError(
            f"{source_name}: no fio JSON output found",
            "run fio with --output-format=json or json+ and import that file",
        ) from None
    if not result.jobs:
        raise UsageError(f"{source_name}: fio's output has no measured job")
    target = label or source_name
    started = now()
    environment = {"imported_from": source_name, "fio_version": result.fio_version}
    run_id = store.create_run("import", environment, started, label=label)
    store.add_target(run_id, TargetRecord(name=target, kind="import"))
    status = "completed"
    for job in result.jobs:
        failed = job.error != 0
        store.add_step(
            run_id,
            StepRecord(
                target=target,
                workload="fio",
                params=fio_job_params(job, result.fio_version),
                status="failed" if failed else "completed",
                started_at=started,
                finished_at=started,
                metrics=job_metrics(job),
                error=f"fio reported error {job.error} ({os.strerror(job.error)})"
                if failed
                else None,
                histograms=histograms_us(job.histograms_ns),
            ),
        )
        status = "failed" if failed else status
    store.finish_run(run_id, status, now())
    return run_id
