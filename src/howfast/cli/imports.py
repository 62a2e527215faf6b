"""`howfast import pgbench|fio FILE|-`: store output produced elsewhere (kubectl logs, CI
jobs, fio run by hand). One command per workload whose plugin declares an importer
(plugin/importing.py), with the importer's help; `import run` is a run file's
(cli/import_run.py)."""

from __future__ import annotations

import click

from howfast import import_text
from howfast.cli.context import CliEnv, current_env
from howfast.cli.options import json_option, store_option
from howfast.cli.output import print_stored_run
from howfast.cli.stores import open_results
from howfast.import_text import TextSource
from howfast.plugin.importing import TextImporter
from howfast.service.importer import import_output, importers


@click.group("import")
def import_group() -> None:
    """Store results of tools run elsewhere."""


def read_input(env: CliEnv, source: str) -> tuple[TextSource, str]:
    """(text, name) from a file path or '-' for standard input, read as bytes and decoded
    (UTF-8, or UTF-16/32 as PowerShell's `>` writes them); the text is read when used."""
    text = import_text.open_source(source, env.input() if source == "-" else None)
    return text, text.name


def store_imported(
    source: str,
    label: str | None,
    store: str | None,
    as_json: bool,
    importer: TextImporter,
) -> int:
    """Read `source`, store what `importer` makes of it, and print the new run."""
    env = current_env()
    text, name = read_input(env, source)
    db = open_results(env, store)
    try:
        run_id = import_output(db, importer, text, source_name=name, label=label)
    except BaseException:
        db.close()
        raise
    print_stored_run(env, db, run_id, as_json)
    if not as_json:
        env.info(f"stored as run {run_id}")
    return 0


def import_command(command: str, importer: TextImporter) -> click.Command:
    """`howfast import <command> [FILE|-] [--label TEXT] [--store URL] [--json]`."""

    @click.argument("source", default="-", metavar="[FILE|-]")
    @click.option("--label", help=importer.label_help)
    @store_option
    @json_option
    def run_import(source: str, label: str | None, store: str | None, as_json: bool) -> int:
        return store_imported(source, label, store, as_json, importer)

    return click.command(command, help=importer.help)(run_import)


for _command, _importer in importers().items():
    import_group.add_command(import_command(_command, _importer))


# `import run` (a run file of `howfast export json`) lives in its own module.
from howfast.cli.import_run import import_run_command  # noqa: E402

import_group.add_command(import_run_command)
