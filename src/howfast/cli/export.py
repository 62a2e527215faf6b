"""`howfast export prometheus RUN_ID -o FILE.prom`: a stored run for node_exporter's textfile
collector."""

from __future__ import annotations

from pathlib import Path

import click

from howfast.cli.context import CliEnv
from howfast.cli.options import check_path_value, parse_run_id, store_option
from howfast.cli.reading import read_run
from howfast.cli.stores import open_results
from howfast.errors import UsageError
from howfast.metrics.textfile import render_run, write_atomically


@click.group("export")
def export_group() -> None:
    """Export stored runs to other tools."""


@export_group.command("prometheus")
@click.argument("run_id")
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="FILE.prom",
    callback=check_path_value,
    help="Where to write (- for stdout). Written atomically, as the textfile collector wants.",
)
@store_option
def prometheus_command(run_id: str, output: str, store: str | None) -> int:
    """Write run RUN_ID in Prometheus's text format for node_exporter's textfile collector.

    \b
    Example:
      howfast export prometheus 12 -o /var/lib/prometheus/node-exporter/howfast-12.prom
    """
    env = CliEnv()
    rid = parse_run_id(run_id)
    db = open_results(env, store, reading=True)
    try:
        run = read_run(db, rid, all_series=True)  # derived, like every run shown
    finally:
        db.close()
    if run is None:
        raise UsageError(f"no run {rid} in the store", "see `howfast results list`")
    text = render_run(run)
    if output == "-":
        env.stdout.write(text)
        env.stdout.flush()
        return 0
    path = Path(output)
    if path.suffix != ".prom":
        env.info(f"note: the textfile collector only reads files ending in .prom, not {path}")
    try:
        write_atomically(path, text)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc}") from None
    env.info(f"wrote run {rid} ({len(run.steps)} steps) to {path}")
    return 0
