"""The `howfast` command group; each command lives in its own module, imported only when
that command runs: most of howfast's start-up time is importing (SQLAlchemy, NumPy,
pydantic models), and a command should pay for what it uses."""

from __future__ import annotations

import importlib

import click

from howfast import __version__

# name -> (module under howfast.cli, the click command in it), in the order help lists them
COMMANDS = {
    "run": ("run", "run_command"),
    "results": ("results", "results_group"),
    "import": ("imports", "import_group"),
    "plans": ("plans", "plans_command"),
    "doctor": ("doctor", "doctor_command"),
    "probe": ("probe", "probe_command"),
    "compare": ("compare", "compare_command"),
    "report": ("report", "report_command"),
    "export": ("export", "export_group"),
    "cleanup": ("cleanup", "cleanup_command"),
    "fetch": ("in_cluster", "fetch_command"),
    "in-cluster-job": ("in_cluster", "in_cluster_job_command"),  # hidden: the Job's pod runs it
}


class LazyGroup(click.Group):
    """A group whose commands are imported when they are asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = COMMANDS.get(cmd_name)
        if found is None:
            return None
        module = importlib.import_module(f"howfast.cli.{found[0]}")
        command = getattr(module, found[1])
        assert isinstance(command, click.Command)
        return command


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
