"""`howfast report RUN_ID... -o FILE.html|FILE.md|-`: tables and charts people would rather
look at than read."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from howfast.analysis.trials import with_slo
from howfast.cli.context import CliEnv, pass_env
from howfast.cli.options import output_value, parse_run_id, say_where, slo_option, store_option
from howfast.cli.stores import open_results
from howfast.exports.output import write_output
from howfast.outfile import OutputFile
from howfast.report.output import FORMATS, html_report, report_format, series_to_read, write_report
from howfast.service.reading import derived, printable_run, stored_runs
from howfast.slo import FailureSlo


@click.command("report")
@click.argument("run_ids", nargs=-1, required=True, metavar="RUN_ID...")
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="FILE",
    callback=output_value,
    help="The report file: .html (one self-contained page, works offline) or .md "
    "(Markdown, with the charts as PNG files in FILE-charts/ beside it); - for standard "
    "output (with --format html). A regular file or a new name; its mode and owner kept.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS, case_sensitive=False),
    help="The format, when the file's suffix does not tell it (needed with -o -).",
)
@slo_option
@store_option
@pass_env
def report_command(
    env: CliEnv,
    run_ids: tuple[str, ...],
    output: OutputFile | None,
    fmt: str | None,
    slo: FailureSlo | None,
    store: str | None,
) -> int:
    """Write an HTML or Markdown report of runs: tables and charts.

    Each target's environment, pgbench TPS and latency by clients (mean ± 95% CI over
    repetitions), per-second TPS, latency and disk I/O with checkpoints, the storage probe,
    the load phases, and with several runs a comparison with the first.

    \b
    Examples:
      howfast report 12 14 -o storage.html
      howfast report 12 -o storage.md
      howfast report 12 -o - --format html | gzip > storage.html.gz
    """
    ids = list(dict.fromkeys(parse_run_id(r) for r in run_ids))
    # A wrong suffix is an error before anything is read.
    fmt = report_format(output.given if output is not None else None, fmt)
    db = open_results(env, store, reading=True)
    try:
        runs = [printable_run(run) for run in stored_runs(db, ids)]
        names = series_to_read(runs)
        runs = [with_slo(derived(db, run, names), slo) for run in runs]
    finally:
        db.close()
    generated = _minute(env.clock.now())
    if output is None:  # standard output: HTML only (report_format)
        write_output(None, [html_report(runs, generated)], env.stdout)
        return 0
    say_where(env, output)
    written = write_report(runs, output, generated_at=generated, fmt=fmt)
    where = f" and {written.images_dir}/" if written.images_dir else ""
    env.info(
        f"wrote {written.path}{where}: {written.size_bytes / 1024:,.0f} KiB, "
        f"{written.charts} charts"
    )
    return 0


def _minute(stored: str) -> str:
    """A stored timestamp (clock.py) as the report says when it was made: to the minute."""
    return datetime.fromisoformat(stored).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
