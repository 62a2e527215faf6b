"""`howfast import run FILE|-`: the runs of a run file (`howfast export json`) stored in this
store, each under a new id with where it came from (the work is in howfast/exports/)."""

from __future__ import annotations

import click

from howfast import import_text
from howfast.cli.context import CliEnv, pass_env
from howfast.cli.options import json_option, store_option
from howfast.cli.stores import open_results
from howfast.errors import UsageError
from howfast.exports import runcheck
from howfast.exports.restore import restore_run
from howfast.exports.runfile import parse_run_file
from howfast.report import terminal
from howfast.service.reading import read_run, run_document
from howfast.store.liveness import this_process


@click.command("run")
@click.argument("source", metavar="FILE|-")
@store_option
@json_option
@pass_env
def import_run_command(env: CliEnv, source: str, store: str | None, as_json: bool) -> int:
    """Store the runs of a run file written by `howfast export json`: the same figures,
    series and histograms, each run under a new id, with its provenance (source store, run
    id, when it was exported, by which howfast) in its environment.

    \b
    Example:
      howfast export json 12 -o run-12.json --store ci.db
      howfast import run run-12.json            # into the default store
    """
    text = import_text.open_source(source, env.input() if source == "-" else None)
    name = text.name
    # Read and checked whole before anything is written: a bad file stores nothing.
    exported = parse_run_file(_bounded_text(text), name)
    db = open_results(env, store)
    try:
        new_ids = []
        for item in exported:
            new_ids.append(restore_run(db, item, writer=this_process().document()))
            env.info(f"run {item.provenance.source_run_id} of {name} stored as run {new_ids[-1]}")
        runs = [read_run(db, rid) for rid in new_ids]
    finally:
        db.close()
    if as_json:
        # A list whatever the count: a run file may hold several runs.
        env.print_json([run_document(run) for run in runs if run is not None])
    else:
        for run in runs:
            if run is not None:
                env.out.print(terminal.run_summary(run))
    return 0


def _bounded_text(source: import_text.TextSource) -> str:
    """The whole text, read no further than a run file can be (runcheck.MAX_CHARS): a
    larger input is refused before it is held."""
    parts, size = [], 0
    for chunk in source.chunks():
        size += len(chunk)
        if size > runcheck.MAX_CHARS:
            raise UsageError(
                f"{source.name}: more than a run file may hold ({runcheck.MAX_CHARS:,} "
                "characters), nothing stored",
                "export fewer runs per file",
            )
        parts.append(chunk)
    return "".join(parts)
