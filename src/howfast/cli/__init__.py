"""Command-line entry point: parse, call, print; errors become one line and an exit status.

`main(args, env)` runs one command in this process with the environment `env` (streams,
terminal, process environment, store, clock: cli/context.py) and returns its exit status;
`howfast` (__main__.py) exits with it."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping, Sequence

import click

from howfast.cli.app import cli
from howfast.cli.context import CliEnv
from howfast.errors import Aborted, ExitStatus, HowfastError
from howfast.printable import printable
from howfast.redact import passwords_in, redact_text
from howfast.store.location import ENV_VAR


def secrets_given(argv: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """Every password in the command line and the store's environment variable: whatever a
    message quotes of a connection text (a malformed one included) is redacted with them."""
    texts = [*argv, environ.get(ENV_VAR, "")]
    return sorted({p for text in texts for p in passwords_in(text)}, key=len, reverse=True)


def main(
    args: Sequence[str] | None = None, env: CliEnv | None = None, *, prog_name: str = "howfast"
) -> int:
    """Run the command `args` (default: this process's arguments) in `env` (default: this
    process's streams and environment); its exit status."""
    env = CliEnv() if env is None else env
    argv = list(sys.argv[1:] if args is None else args)
    secrets = secrets_given(argv, env.environ)

    def fail(text: str, status: int) -> int:
        # A message may quote what the user gave; its control characters are shown as escapes.
        env.stderr.write(printable(redact_text(text, *secrets), keep="\n\t") + "\n")
        env.stderr.flush()
        return status

    try:
        with _streams(env):
            status = cli.main(args=argv, prog_name=prog_name, standalone_mode=False, obj=env)
    except HowfastError as exc:
        return fail(f"howfast: error: {exc}", int(exc.exit_status))
    except click.exceptions.Abort:
        return fail("howfast: interrupted", int(ExitStatus.ABORTED))
    except click.ClickException as exc:
        return fail(f"howfast: error: {exc.format_message()}", int(ExitStatus.USAGE))
    except (KeyboardInterrupt, Aborted):
        return fail("howfast: interrupted", int(ExitStatus.ABORTED))
    except Exception:  # a bug: its traceback, but never a password quoted in it
        import traceback  # here: only a bug needs it, and every command loads this module

        return fail(traceback.format_exc().rstrip(), int(ExitStatus.ERROR))
    return int(status) if isinstance(status, int) else 0


@contextlib.contextmanager
def _streams(env: CliEnv) -> Iterator[None]:
    """What click itself prints (--help, --version, prompts) goes to the environment's
    streams too; a no-op for this process's own."""
    with contextlib.ExitStack() as stack:
        if env.stdout is not sys.stdout:
            stack.enter_context(contextlib.redirect_stdout(env.stdout))
        if env.stderr is not sys.stderr:
            stack.enter_context(contextlib.redirect_stderr(env.stderr))
        yield
