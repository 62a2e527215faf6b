"""`howfast export prometheus RUN_ID -o FILE.prom`: a stored run for node_exporter's textfile
collector. `howfast export json|csv|ndjson RUN...`: run files for `howfast import run`, and
flat rows for pipelines (the work is in howfast/exports/)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from howfast import __version__
from howfast.cli.context import CliEnv, pass_env
from howfast.cli.options import output_value, parse_run_id, say_where, store_option
from howfast.cli.stores import open_results
from howfast.errors import UsageError
from howfast.exports.output import write_output
from howfast.exports.rows import csv_chunks, ndjson_chunks, run_rows
from howfast.exports.runfile import export_document
from howfast.metrics.textfile import render_run
from howfast.model import RunRecord
from howfast.outfile import OutputFile
from howfast.service.reading import read_run


@click.group("export")
def export_group() -> None:
    """Export stored runs to other tools and other stores."""


output_option = click.option(
    "-o",
    "--output",
    metavar="FILE",
    callback=output_value,
    help="Where to write [default: stdout, also -]: a regular file or a new name (a link only "
    "to a regular file), written under a temporary name and renamed; its mode and owner kept.",
)


def _run_ids(run_ids: tuple[str, ...]) -> list[int]:
    return list(dict.fromkeys(parse_run_id(r) for r in run_ids))


def _stored_runs(env: CliEnv, store: str | None, ids: list[int]) -> tuple[list[RunRecord], str]:
    """The runs as stored, with every series and histogram, and the store's location."""
    db = open_results(env, store, reading=True)
    try:
        found = {rid: db.get_run(rid, with_series=True) for rid in ids}
        location = db.location
    finally:
        db.close()
    return _all_found(found), location


def _derived_runs(env: CliEnv, store: str | None, ids: list[int], series: bool) -> list[RunRecord]:
    """The runs derived, as every command shows them; with every series when `series`."""
    db = open_results(env, store, reading=True)
    try:
        found = {rid: read_run(db, rid, all_series=series) for rid in ids}
    finally:
        db.close()
    return _all_found(found)


def _all_found(found: dict[int, RunRecord | None]) -> list[RunRecord]:
    missing = [str(rid) for rid, run in found.items() if run is None]
    if missing:
        raise UsageError(f"no run {', '.join(missing)} in the store", "see `howfast results list`")
    return [run for run in found.values() if run is not None]


def _done(env: CliEnv, path: Path | None, what: str) -> int:
    if path is not None:
        env.info(f"wrote {what} to {path}")
    return 0


@export_group.command("json")
@click.argument("run_ids", nargs=-1, required=True, metavar="RUN...")
@output_option
@store_option
@pass_env
def json_command(
    env: CliEnv, run_ids: tuple[str, ...], output: OutputFile | None, store: str | None
) -> int:
    """Write runs as a run file, for `howfast import run` in another store: every figure,
    series and histogram as stored; verdicts are derived again where it is imported.

    \b
    Example:
      howfast export json 12 14 -o runs.json
      howfast import run runs.json --store other.db
    """
    runs, location = _stored_runs(env, store, _run_ids(run_ids))
    document = export_document(
        runs,
        source_store=location,
        exported_at=env.clock.now(),
        howfast_version=__version__,
    )
    text = json.dumps(document, separators=(",", ":")) + "\n"  # compact: series are long
    say_where(env, output)
    path = write_output(output, [text], env.stdout)
    return _done(env, path, f"{len(runs)} run{'s' if len(runs) > 1 else ''}")


def _rows_command(fmt: str) -> click.Command:
    @click.argument("run_ids", nargs=-1, required=True, metavar="RUN...")
    @output_option
    @click.option("--series", is_flag=True, help="Add a row per per-second sample (column t_s).")
    @store_option
    @pass_env
    def command(
        env: CliEnv,
        run_ids: tuple[str, ...],
        output: OutputFile | None,
        series: bool,
        store: str | None,
    ) -> int:
        runs = _derived_runs(env, store, _run_ids(run_ids), series)
        rows = run_rows(runs, series=series)
        chunks = csv_chunks(rows, series) if fmt == "csv" else ndjson_chunks(rows, series)
        say_where(env, output)
        path = write_output(output, chunks, env.stdout)
        return _done(env, path, f"the rows of {len(runs)} run{'s' if len(runs) > 1 else ''}")

    command.__doc__ = ROWS_HELP.format(fmt=fmt, what=ROWS_WHAT[fmt])
    return click.command(fmt)(command)


ROWS_WHAT = {
    "csv": "CSV with a header line",
    "ndjson": "newline-delimited JSON, one object per line",
}
ROWS_HELP = """Write one row per step and figure ({what}): run, target, kind,
    workload, mode, clients, repetition, metric, value, unit, step, status.

    Figures are those `howfast results show` shows (derived); warm-up steps are left out.

    \b
    Example:
      howfast export {fmt} 12 14 -o runs.{fmt}
      howfast export {fmt} 12 --series | head
    """

export_group.add_command(_rows_command("csv"))
export_group.add_command(_rows_command("ndjson"))


@export_group.command("prometheus")
@click.argument("run_id")
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="FILE.prom",
    callback=output_value,
    help="Where to write (- for stdout): a regular file or a new name, written atomically as "
    "the textfile collector wants.",
)
@store_option
@pass_env
def prometheus_command(
    env: CliEnv, run_id: str, output: OutputFile | None, store: str | None
) -> int:
    """Write run RUN_ID in Prometheus's text format for node_exporter's textfile collector.

    \b
    Example:
      howfast export prometheus 12 -o /var/lib/prometheus/node-exporter/howfast-12.prom
    """
    rid = parse_run_id(run_id)
    db = open_results(env, store, reading=True)
    try:
        run = read_run(db, rid, all_series=True)  # derived, like every run shown
    finally:
        db.close()
    if run is None:
        raise UsageError(f"no run {rid} in the store", "see `howfast results list`")
    text = render_run(run)
    if output is not None and output.given.suffix != ".prom":
        env.info(
            f"note: the textfile collector only reads files ending in .prom, not {output.given}"
        )
    say_where(env, output)
    path = write_output(output, [text], env.stdout)
    if path is not None:
        env.info(f"wrote run {rid} ({len(run.steps)} steps) to {path}")
    return 0
