"""Turning tool output produced elsewhere into a stored run: `howfast import <command>`, one
command per workload whose plugin declares an importer (plugin/importing.py: pgbench, fio).
The importer reads the text into steps; this stores them as a run of plan `import`, on one
target of kind `import` named by the label or the file."""

from __future__ import annotations

from howfast.clock import now
from howfast.errors import UsageError
from howfast.exports.runcheck import (
    FigureFault,
    check_histograms,
    check_named,
    check_series,
)
from howfast.import_text import TextSource
from howfast.model import JSONValue, TargetRecord
from howfast.plugin.importing import ImportedRun, TextImporter
from howfast.plugin.loading import load
from howfast.plugin.registry import plugins
from howfast.redact import redact_dsn
from howfast.store import liveness
from howfast.store.base import Store


def importers() -> dict[str, TextImporter]:
    """The importer of each workload that declares one, by its command (the workload's
    name), in the workloads' order."""
    found = {}
    for name, plugin in plugins().items():
        if plugin.importer is not None:
            importer = load(plugin.importer)
            if not isinstance(importer, TextImporter):
                raise TypeError(f"{plugin.importer} is not a TextImporter")
            found[name] = importer
    return found


def importer_for(command: str) -> TextImporter:
    """The importer of `howfast import <command>`; UsageError names the known ones."""
    found = importers()
    if command not in found:
        raise UsageError(f"nothing imports {command!r}; known: {', '.join(found)}")
    return found[command]


def _writer() -> dict[str, JSONValue]:
    """This process, as the run's writer: an import killed before it finishes (SIGKILL, the
    OOM killer) is then marked aborted by the next command, as a killed run is."""
    return liveness.this_process().document()


def import_output(
    store: Store,
    importer: TextImporter,
    text: str | TextSource,
    *,
    source_name: str,
    label: str | None,
) -> int:
    """Read `text` with `importer` and store its steps, in order, as a new run; its id.
    Nothing is stored when the importer refuses the text (UsageError)."""
    found = importer.read(text, source_name)
    check_figures(found, source_name)
    # a label or a file name is the user's text: a connection string in it keeps no password
    label = redact_dsn(label) if label is not None else None
    source_name = redact_dsn(source_name)
    target = label or source_name
    started = now()
    environment: dict[str, JSONValue] = {"imported_from": source_name, **found.environment}
    run_id = store.create_run("import", environment, started, label=label, writer=_writer())
    store.add_target(run_id, TargetRecord(name=target, kind="import", pg_version=found.pg_version))
    status = "completed"
    for step in found.steps:
        store.add_step(run_id, step.record(target, started), more_series=step.series or None)
        status = "failed" if step.status == "failed" else status
    store.finish_run(run_id, status, now())
    return run_id


def check_figures(found: ImportedRun, source_name: str) -> None:
    """The figures a parser read, held to the rules a run file's are (metric.bounds_for):
    a number no tool can have printed (a TPS of 10^400, a negative latency) refuses the
    output, naming the step and the figure; nothing is stored."""
    try:
        for index, step in enumerate(found.steps):
            where = f"step {index + 1} ({step.workload})"
            check_named(step.metrics, f"{where} metrics")
            check_named(step.params, f"{where} params")
            check_histograms(step.histograms, f"{where} histograms")
            for name, (times, values) in step.series.items():
                check_series(name, list(zip(times, values, strict=False)), f"{where} series")
    except FigureFault as fault:
        raise UsageError(
            f"{source_name}: {fault}: not a figure the tool can have printed, nothing stored",
            "import the output the tool wrote, unedited",
        ) from None
