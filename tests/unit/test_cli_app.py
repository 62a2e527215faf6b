"""The command table of cli/app.py: `--help` lists commands from it without importing them,
so what it says of each command must be what the command itself says."""

from __future__ import annotations

import io

import click
import pytest

from howfast.cli import main
from howfast.cli.app import COMMANDS, cli
from howfast.cli.context import CliEnv

# Every width a terminal may give the listing: the real and the table's short help are
# shortened the same way at each.
LIMITS = range(3, 200)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_table_says_what_the_command_says(name: str) -> None:
    entry = COMMANDS[name]
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    assert command.name == name
    assert entry.hidden == command.hidden
    stand_in = click.Command(name, help=entry.short_help)
    for limit in LIMITS:
        assert stand_in.get_short_help_str(limit) == command.get_short_help_str(limit), limit


def test_help_lists_every_visible_command_with_its_short_help() -> None:
    out = io.StringIO()
    assert main(["--help"], CliEnv(stdout=out, stderr=io.StringIO())) == 0
    listing = out.getvalue().split("Commands:\n", 1)[1]
    names = [line.split()[0] for line in listing.splitlines() if line.strip()]
    assert names == [name for name, entry in COMMANDS.items() if not entry.hidden]
    assert "in-cluster-job" not in listing
    assert "List, show and delete stored runs." in listing
