"""`howfast import pgbench|fio FILE|-`: store output produced elsewhere (kubectl logs, CI
jobs, fio run by hand)."""

from __future__ import annotations

from typing import Protocol

import click

from howfast import import_text
from howfast.cli.context import CliEnv, current_env
from howfast.cli.options import json_option, store_option
from howfast.cli.output import print_stored_run
from howfast.cli.stores import open_results
from howfast.import_text import TextSource
from howfast.service.importer import import_fio_text, import_pgbench_text
from howfast.store.base import Store


@click.group("import")
def import_group() -> None:
    """Store results of tools run elsewhere."""


def read_input(env: CliEnv, source: str) -> tuple[TextSource, str]:
    """(text, name) from a file path or '-' for standard input, read as bytes and decoded
    (UTF-8, or UTF-16/32 as PowerShell's `>` writes them); the text is read when used."""
    text = import_text.open_source(source, env.input() if source == "-" else None)
    return text, text.name


class Importer(Protocol):
    """import_pgbench_text, import_fio_text: parse text, store it as a run, return its id."""

    def __call__(
        self, store: Store, text: TextSource, *, source_name: str, label: str | None
    ) -> int: ...


def store_imported(
    source: str,
    label: str | None,
    store: str | None,
    as_json: bool,
    importer: Importer,
) -> int:
    """Read `source`, store what `importer` makes of it, and print the new run."""
    env = current_env()
    text, name = read_input(env, source)
    db = open_results(env, store)
    try:
        run_id = importer(db, text, source_name=name, label=label)
    except BaseException:
        db.close()
        raise
    print_stored_run(env, db, run_id, as_json)
    if not as_json:
        env.info(f"stored as run {run_id}")
    return 0


@import_group.command("pgbench")
@click.argument("source", default="-", metavar="[FILE|-]")
@click.option("--label", help="What was measured, e.g. 'longhorn 3 replicas'.")
@store_option
@json_option
def import_pgbench(source: str, label: str | None, store: str | None, as_json: bool) -> int:
    """Parse pgbench output (a run, an init, or both) and store it as a run.

    \b
    Example:
      kubectl logs job/pgbench-1 | howfast import pgbench - --label "longhorn 3 replicas"
    """
    return store_imported(source, label, store, as_json, import_pgbench_text)


@import_group.command("fio")
@click.argument("source", default="-", metavar="[FILE|-]")
@click.option("--label", help="What was measured, e.g. 'ceph rbd'.")
@store_option
@json_option
def import_fio(source: str, label: str | None, store: str | None, as_json: bool) -> int:
    """Parse fio's JSON output (--output-format=json or json+) and store it as a run: one
    fio step per job, its params taken from the job's options.

    \b
    Example:
      fio --output-format=json+ --output=result.json job.fio
      howfast import fio result.json --label "ceph rbd"
    """
    return store_imported(source, label, store, as_json, import_fio_text)


# `import run` (a run file of `howfast export json`) lives in its own module.
from howfast.cli.import_run import import_run_command  # noqa: E402

import_group.add_command(import_run_command)
