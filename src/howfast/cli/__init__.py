"""Command-line entry point: parse, call, print; errors become one line and an exit status."""

from __future__ import annotations

import sys

import click

from howfast.cli.app import cli
from howfast.errors import Aborted, ExitStatus, HowfastError


def main(argv: list[str] | None = None) -> None:
    try:
        status = cli.main(args=argv, prog_name="howfast", standalone_mode=False)
    except HowfastError as exc:
        click.echo(f"howfast: error: {exc}", err=True)
        sys.exit(int(exc.exit_status))
    except click.exceptions.Abort:
        click.echo("howfast: interrupted", err=True)
        sys.exit(int(ExitStatus.ABORTED))
    except click.ClickException as exc:
        click.echo(f"howfast: error: {exc.format_message()}", err=True)
        sys.exit(int(ExitStatus.USAGE))
    except (KeyboardInterrupt, Aborted):
        click.echo("howfast: interrupted", err=True)
        sys.exit(int(ExitStatus.ABORTED))
    sys.exit(int(status) if isinstance(status, int) else 0)
