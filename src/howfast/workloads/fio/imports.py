"""`howfast import fio`: fio's JSON output (json or json+, any fio 2.x/3.x) read into the steps
of a run, one per measured job (plugin/importing.py; service/importer.py stores them);
howfast's own unmeasured prefill job is left out."""

from __future__ import annotations

import os
import signal

from howfast.errors import UsageError
from howfast.import_text import TextSource
from howfast.model import JSONValue
from howfast.plugin.importing import ImportedRun, ImportedStep, TextImporter
from howfast.units import duration_seconds, size_bytes
from howfast.workloads.fio import parse as fio_parse
from howfast.workloads.fio.workload import histograms_us, job_metrics

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


class FioImporter(TextImporter):
    help = """Parse fio's JSON output (--output-format=json or json+) and store it as a run: one
    fio step per job, its params taken from the job's options.

    \b
    Example:
      fio --output-format=json+ --output=result.json job.fio
      howfast import fio result.json --label "ceph rbd"
    """
    label_help = "What was measured, e.g. 'ceph rbd'."

    def read(self, text: str | TextSource, source_name: str) -> ImportedRun:
        try:
            result = fio_parse.parse_output(text if isinstance(text, str) else text.text())
        except fio_parse.FigureError as exc:
            raise UsageError(
                f"{source_name}: fio's output holds a figure that is not a measurement, "
                f"nothing stored: {exc}",
                "import the JSON fio wrote, unedited; a figure fio could not compute is a fio bug",
            ) from None
        except ValueError:
            raise UsageError(
                f"{source_name}: no fio JSON output found",
                "run fio with --output-format=json or json+ and import that file",
            ) from None
        if not result.jobs:
            raise UsageError(f"{source_name}: fio's output has no measured job")
        steps = []
        for job in result.jobs:
            failed = job.error != 0
            steps.append(
                ImportedStep(
                    workload="fio",
                    params=fio_job_params(job, result.fio_version),
                    status="failed" if failed else "completed",
                    metrics=job_metrics(job),
                    warnings=tuple(_stopped_warnings(result)),
                    error=f"fio reported error {job.error} ({os.strerror(job.error)})"
                    if failed
                    else None,
                    histograms=histograms_us(job.histograms_ns),
                )
            )
        return ImportedRun(tuple(steps), {"fio_version": result.fio_version})


IMPORTER = FioImporter()
