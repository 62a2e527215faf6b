"""Turning tool output produced elsewhere into a stored run: pgbench (one step per init and
run in the text, in order) and fio (one step per measured job)."""

from __future__ import annotations

import os
import signal

from howfast.clock import now
from howfast.errors import UsageError
from howfast.import_text import TextSource
from howfast.model import JSONValue, StepRecord, TargetRecord
from howfast.store import liveness
from howfast.store.base import Columns, Store
from howfast.units import duration_seconds, size_bytes
from howfast.workloads.fio import parse as fio_parse
from howfast.workloads.fio.workload import histograms_us, job_metrics
from howfast.workloads.pgbench import invocations, parse
from howfast.workloads.pgbench.progress import ProgressSeries

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
    """The params the output states, under the names `howfast run` uses (docs/json.md): a
    custom script, or several scripts, are mode "custom" with their names in `scripts`, as
    pgbench printed them (a file's path, "<builtin: select only>"), and with several scripts
    their weights in `script_weights`."""
    scripts: list[JSONValue] | None = None
    weights: list[JSONValue] | None = None
    if run.mode == "multiple":
        scripts = [s.name for s in run.scripts] or None
        if run.scripts and all(s.weight is not None for s in run.scripts):
            weights = [s.weight for s in run.scripts]
    elif run.mode == "custom" and run.script is not None:
        scripts = [run.script]
    candidates: dict[str, JSONValue] = {
        "mode": "custom" if run.mode == "multiple" else run.mode,
        "scripts": scripts,
        "script_weights": weights,
        "clients": run.clients,
        "jobs": run.threads,
        "duration_s": run.duration_s,
        "transactions": run.transactions_per_client,
        "scale": run.scale,
        "rate": run.rate,
        "protocol": run.query_mode,
        "latency_limit_ms": run.latency_limit_ms,
    }
    return {k: v for k, v in candidates.items() if v is not None}


def pgbench_init_params(init: parse.PgbenchInit) -> dict[str, JSONValue]:
    """An init's params under the names `howfast run` uses: scale, generate (client/server),
    fillfactor, partitions, partition_method, as far as the output and its command say."""
    candidates: dict[str, JSONValue] = {
        "scale": init.scale or None,
        "generate": init.generate,
        "fillfactor": init.fillfactor,
        "partitions": init.partitions,
        "partition_method": init.partition_method,
    }
    return {k: v for k, v in candidates.items() if v is not None}


def _writer() -> dict[str, JSONValue]:
    """This process, as the run's writer: an import killed before it finishes (SIGKILL, the
    OOM killer) is then marked aborted by the next command, as a killed run is."""
    return liveness.this_process().document()


def import_pgbench_text(
    store: Store, text: str | TextSource, *, source_name: str, label: str | None
) -> int:
    """Store every init and run of a pgbench output as a step, in order. Refused (UsageError,
    nothing stored) when none of them is complete: a run without its summary's "tps = " line,
    an init without its "done" line. A TextSource is read a few times, never held whole."""
    found = invocations.parse_source(text.splitlines if isinstance(text, str) else text.lines)
    if not found:
        raise UsageError(
            f"{source_name}: no pgbench output found (expected the summary pgbench prints, "
            "e.g. 'tps = ...' or 'done in ... s')"
        )
    if not any(_complete(item) for item in found):
        reasons = "; ".join(dict.fromkeys(_missing(item) for item in found))
        raise UsageError(f"{source_name}: no complete pgbench output, nothing stored: {reasons}")
    target = label or source_name
    started = now()
    environment: dict[str, JSONValue] = {"imported_from": source_name}
    client_version = next((item.version for item in found if item.version), None)
    if client_version is not None:
        environment["pgbench_version"] = client_version
    run_id = store.create_run("import", environment, started, label=label, writer=_writer())
    store.add_target(
        run_id, TargetRecord(name=target, kind="import", pg_version=_server_version(found))
    )
    status = "completed"
    for item in found:
        step = _step(item, target, started)
        store.add_step(run_id, step, more_series=_progress_series(item))
        status = "failed" if step.status == "failed" else status
    store.finish_run(run_id, status, now())
    return run_id


def _server_version(found: list[parse.PgbenchInit | parse.PgbenchRun]) -> str | None:
    """The server's version: pgbench 14+ prints "pgbench (CLIENT, server SERVER)" when the two
    differ, and only its own version when they are the same."""
    for item in found:
        if isinstance(item, parse.PgbenchRun) and item.server_version:
            return item.server_version
    return next((item.version for item in found if item.version), None)


def _complete(item: parse.PgbenchInit | parse.PgbenchRun) -> bool:
    if isinstance(item, parse.PgbenchInit):
        return item.completed
    return item.tps is not None


def _missing(item: parse.PgbenchInit | parse.PgbenchRun) -> str:
    """Why an init or run is not complete, for its step's error."""
    errors = "\n".join(item.errors)
    if isinstance(item, parse.PgbenchInit):
        if errors:
            return f"pgbench -i failed before its end: {errors}"
        return "the init output ends before pgbench's 'done' line (cut short?)"
    has_summary = item.transactions is not None or item.clients is not None
    if errors and not has_summary:
        return f"pgbench failed before its summary: {errors}"
    if errors:
        return f"pgbench stopped before its summary's 'tps = ...' line: {errors}"
    if has_summary:
        return "the output ends before pgbench's 'tps = ...' line (cut short?)"
    if item.progress:
        return (
            f"the output ends after {len(item.progress)} progress lines, before pgbench's "
            "summary (cut short?)"
        )
    return "no pgbench summary"


def _step(item: parse.PgbenchInit | parse.PgbenchRun, target: str, started: str) -> StepRecord:
    """The step of one init or run; failed, with what was missing or went wrong, when pgbench
    reported errors or the output is not complete."""
    failed = bool(item.errors) or not _complete(item)
    if isinstance(item, parse.PgbenchRun):
        failed = failed or item.aborted
    error = ("\n".join(item.errors) if _complete(item) else _missing(item)) if failed else None
    if isinstance(item, parse.PgbenchInit):
        return StepRecord(
            target=target,
            workload="pgbench-init",
            params=pgbench_init_params(item),
            status="failed" if failed else "completed",
            started_at=started,
            finished_at=started,
            metrics=dict(item.metrics()),
            error=error or None,
        )
    return StepRecord(
        target=target,
        workload="pgbench",
        params=pgbench_run_params(item),
        status="failed" if failed else "completed",
        started_at=started,
        finished_at=started,
        metrics=dict(item.metrics()),
        error=error or None,
        warnings=list(item.notes),
    )


def _progress_series(item: parse.PgbenchInit | parse.PgbenchRun) -> dict[str, Columns]:
    """A run's progress lines as its tps and latency_ms series, in columns: a long run has a
    million points, too many to hold as Samples."""
    if not isinstance(item, parse.PgbenchRun) or not item.progress:
        return {}
    progress = item.progress
    if not isinstance(progress, ProgressSeries):
        progress = ProgressSeries(progress)
    return {"tps": (progress.t, progress.tps), "latency_ms": (progress.t, progress.latency_ms)}


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


def _stopped_warnings(result: fio_parse.FioResult) -> list[str]:
    """A fact of the output, not a verdict: fio was stopped before its jobs' end."""
    number = result.stopped_by_signal
    if number is None:
        return []
    try:
        name = f" ({signal.Signals(number).name})"
    except ValueError:
        name = ""
    return [
        f"fio was terminated by signal {number}{name} before its jobs ended: its figures "
        "cover only the time they ran (runtime_s)"
    ]


def import_fio_text(
    store: Store, text: str | TextSource, *, source_name: str, label: str | None
) -> int:
    """Store fio's JSON output (json or json+, any fio 2.x/3.x) as a run with one step per
    measured job; howfast's own unmeasured prefill job is left out."""
    try:
        result = fio_parse.parse_output(text if isinstance(text, str) else text.text())
    except fio_parse.FigureError as exc:
        raise UsageError(
            f"{source_name}: fio's output holds a figure that is not a measurement, nothing "
            f"stored: {exc}",
            "import the JSON fio wrote, unedited; a figure fio could not compute is a fio bug",
        ) from None
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
    run_id = store.create_run("import", environment, started, label=label, writer=_writer())
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
                warnings=_stopped_warnings(result),
                error=f"fio reported error {job.error} ({os.strerror(job.error)})"
                if failed
                else None,
                histograms=histograms_us(job.histograms_ns),
            ),
        )
        status = "failed" if failed else status
    store.finish_run(run_id, status, now())
    return run_id
