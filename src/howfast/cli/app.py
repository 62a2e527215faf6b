"""The `howfast` command group; each command lives in its own module."""

from __future__ import annotations

import click

from howfast import __version__
from howfast.cli import (
    cleanup,
    compare,
    doctor,
    export,
    imports,
    plans,
    probe,
    report,
    results,
    run,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="howfast")
def cli() -> None:
    """How fast is PostgreSQL on this storage?

    Provisions PostgreSQL on the storage under test, runs pgbench (and fio), stores every
    result and prints tables you can compare. Start with `howfast doctor`, then
    `howfast run quick --target DIR`.
    """


cli.add_command(run.run_command)
cli.add_command(results.results_group)
cli.add_command(imports.import_group)
cli.add_command(plans.plans_command)
cli.add_command(doctor.doctor_command)
cli.add_command(probe.probe_command)
cli.add_command(compare.compare_command)
cli.add_command(report.report_command)
cli.add_command(export.export_group)
cli.add_command(cleanup.cleanup_command)
