"""`howfast import pgbench`: pgbench's output produced elsewhere (kubectl logs, CI jobs) read
into the steps of a run, one per init and run in the text, in order (plugin/importing.py;
service/importer.py stores them). The text is parsed as it is read
(workloads/pgbench/invocations.py), never held whole."""

from __future__ import annotations

from howfast.errors import UsageError
from howfast.import_text import TextSource
from howfast.model import JSONValue
from howfast.plugin.importing import Columns, ImportedRun, ImportedStep, TextImporter
from howfast.workloads.pgbench import invocations, parse
from howfast.workloads.pgbench.progress import ProgressSeries


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


class PgbenchImporter(TextImporter):
    help = """Parse pgbench output (a run, an init, or both) and store it as a run.

    \b
    Example:
      kubectl logs job/pgbench-1 | howfast import pgbench - --label "longhorn 3 replicas"
    """
    label_help = "What was measured, e.g. 'longhorn 3 replicas'."

    def read(self, text: str | TextSource, source_name: str) -> ImportedRun:
        """Every init and run of the output. Refused (UsageError) when none of them is
        complete: a run without its summary's "tps = " line, an init without its "done"
        line."""
        found = invocations.parse_source(text.splitlines if isinstance(text, str) else text.lines)
        if not found:
            raise UsageError(
                f"{source_name}: no pgbench output found (expected the summary pgbench prints, "
                "e.g. 'tps = ...' or 'done in ... s')"
            )
        if not any(_complete(item) for item in found):
            reasons = "; ".join(dict.fromkeys(_missing(item) for item in found))
            raise UsageError(
                f"{source_name}: no complete pgbench output, nothing stored: {reasons}"
            )
        environment: dict[str, JSONValue] = {}
        client_version = next((item.version for item in found if item.version), None)
        if client_version is not None:
            environment["pgbench_version"] = client_version
        return ImportedRun(
            tuple(_step(item) for item in found), environment, _server_version(found)
        )


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


def _step(item: parse.PgbenchInit | parse.PgbenchRun) -> ImportedStep:
    """The step of one init or run; failed, with what was missing or went wrong, when pgbench
    reported errors or the output is not complete."""
    failed = bool(item.errors) or not _complete(item)
    if isinstance(item, parse.PgbenchRun):
        failed = failed or item.aborted
    error = ("\n".join(item.errors) if _complete(item) else _missing(item)) if failed else None
    if isinstance(item, parse.PgbenchInit):
        return ImportedStep(
            workload="pgbench-init",
            params=pgbench_init_params(item),
            status="failed" if failed else "completed",
            metrics=dict(item.metrics()),
            error=error or None,
        )
    return ImportedStep(
        workload="pgbench",
        params=pgbench_run_params(item),
        status="failed" if failed else "completed",
        metrics=dict(item.metrics()),
        warnings=tuple(item.notes),
        error=error or None,
        series=_progress_series(item),
    )


def _progress_series(item: parse.PgbenchRun) -> dict[str, Columns]:
    """A run's progress lines as its tps and latency_ms series, in columns: a long run has a
    million points, too many to hold as Samples."""
    if not item.progress:
        return {}
    progress = item.progress
    if not isinstance(progress, ProgressSeries):
        progress = ProgressSeries(progress)
    return {"tps": (progress.t, progress.tps), "latency_ms": (progress.t, progress.latency_ms)}


IMPORTER = PgbenchImporter()
