"""The `howfast` command group; each command lives in its own module, imported only when
that command runs: most of howfast's start-up time is importing (SQLAlchemy, NumPy,
pydantic models), and a command should pay for what it uses. `--help` lists the commands
from the table below, importing none of them."""

from __future__ import annotations

import importlib
from typing import NamedTuple

import click

from howfast import __version__


class LazyCommand(NamedTuple):
    module: str  # under howfast.cli
    attribute: str  # the click command in it
    # The command's own short help (the first sentence of its help), for the listing of
    # `--help`; tests/unit/test_cli_app.py checks it equals what the command says.
    short_help: str
    hidden: bool = False


# name -> where the command is and what `--help` says of it, in the order help lists them
COMMANDS = {
    "run": LazyCommand(
        "run",
        "run_command",
        "Run PLAN (a built-in name or a TOML file; default: quick) on each --target.",
    ),
    "results": LazyCommand("results", "results_group", "List, show and delete stored runs."),
    "import": LazyCommand("imports", "import_group", "Store results of tools run elsewhere."),
    "plans": LazyCommand(
        "plans", "plans_command", "List built-in plans; with NAME, print that plan's TOML."
    ),
    "doctor": LazyCommand(
        "doctor",
        "doctor_command",
        "Check PostgreSQL, pgbench, fio, cgroups, loop devices and drop_caches.",
    ),
    "probe": LazyCommand(
        "probe",
        "probe_command",
        "Probe the storage behind DIR (or k8s://CLASS) with fio and pg_test_fsync; store it.",
    ),
    "compare": LazyCommand(
        "compare",
        "compare_command",
        "Compare runs side by side (or, given one run, its targets): ratios to the first,"
        " with their 95% interval, and significance.",
    ),
    "report": LazyCommand(
        "report",
        "report_command",
        "Write an HTML or Markdown report of runs: tables and charts.",
    ),
    "export": LazyCommand(
        "export", "export_group", "Export stored runs to other tools and other stores."
    ),
    "cleanup": LazyCommand(
        "cleanup",
        "cleanup_command",
        "Find and remove what killed runs (SIGKILL, the OOM killer, a test's time-out) left.",
    ),
    "fetch": LazyCommand(
        "in_cluster", "fetch_command", "Store the run of an in-cluster Job (`howfast run ..."
    ),
    # hidden: the Job's pod runs it
    "in-cluster-job": LazyCommand(
        "in_cluster",
        "in_cluster_job_command",
        "Inside the Job's pod: `howfast run RUN_ARGS` into the pod's scratch store, then every"
        " run of that store as a run file at the end of the log"
        " (targets/k8s/incluster_result.py), whatever the run's outcome: what completed is kept.",
        hidden=True,
    ),
}


class LazyGroup(click.Group):
    """A group whose commands are imported when they are asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = COMMANDS.get(cmd_name)
        if found is None:
            return None
        module = importlib.import_module(f"howfast.cli.{found.module}")
        command = getattr(module, found.attribute)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click.Group's listing, from the table: it would import every command to read its
        short help."""
        listed = {name: c for name, c in COMMANDS.items() if not c.hidden}
        limit = formatter.width - 6 - max(len(name) for name in listed)
        # A command holding just the short help shortens it as the real one would for `limit`.
        rows = [
            (name, click.Command(name, help=c.short_help).get_short_help_str(limit))
            for name, c in listed.items()
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="howfast")
def cli() -> None:
    """How fast is PostgreSQL on this storage?

    Provisions PostgreSQL on the storage under test, runs pgbench (and fio), stores every
    result and prints tables you can compare. Start with `howfast doctor`, then
    `howfast run quick --target DIR`.
    """
