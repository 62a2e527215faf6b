"""Command-line entry point: parse, call, print; errors become one line and an exit status."""

from __future__ import annotations

import os
import sys
import traceback

import click

from howfast.cli.app import cli
from howfast.errors import Aborted, ExitStatus, HowfastError
from howfast.printable import printable
from howfast.redact import passwords_in, redact_text
from howfast.store.location import ENV_VAR


def secrets_given(argv: list[str]) -> list[str]:
    """Every password in the command line and the store's environment variable: whatever a
    message quotes of a connection text (a malformed one included) is redacted with them."""
    texts = [*argv, os.environ.get(ENV_VAR, "")]
    return sorted({p for text in texts for p in passwords_in(text)}, key=len, reverse=True)


def main(argv: list[str] | None = None, prog_name: str = "howfast") -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    secrets = secrets_given(args)

    def fail(text: str, status: int) -> None:
        # A message may quote what the user gave; its control characters are shown as escapes.
        click.echo(printable(redact_text(text, *secrets), keep="\n\t"), err=True)
        sys.exit(status)

    try:
        status = cli.main(args=args, prog_name=prog_name, standalone_mode=False)
    except HowfastError as exc:
        fail(f"howfast: error: {exc}", int(exc.exit_status))
    except click.exceptions.Abort:
        fail("howfast: interrupted", int(ExitStatus.ABORTED))
    except click.ClickException as exc:
        fail(f"howfast: error: {exc.format_message()}", int(ExitStatus.USAGE))
    except (KeyboardInterrupt, Aborted):
        fail("howfast: interrupted", int(ExitStatus.ABORTED))
    except Exception:  # a bug: its traceback, but never a password quoted in it
        fail(traceback.format_exc().rstrip(), int(ExitStatus.ERROR))
    sys.exit(int(status) if isinstance(status, int) else 0)
