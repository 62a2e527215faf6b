"""The environment a command runs in: its streams, whether they are a terminal, the process
environment it reads ($HOWFAST_STORE...), where results go by default, and the clock of
stored timestamps. `main(args, env)` takes one, so that a test runs any command in-process
and reads what it printed (as httpie does); the real one is this process's."""

from __future__ import annotations

import functools
import io
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO, TextIO

import click

from howfast.cancel import CancelToken
from howfast.clock import SYSTEM_CLOCK, Clock
from howfast.model import JSONValue
from howfast.printable import printable

if TYPE_CHECKING:
    from rich.console import Console

    from howfast.service.env import ServiceEnv


@dataclass
class CliEnv:
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    # Bytes, as a pipe delivers them; None: this process's standard input, taken when read.
    stdin: BinaryIO | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    # Whether the streams are a terminal (progress bars, prompts); None: ask the streams.
    terminal: bool | None = None
    # Where results go without --store; None: the environment's $HOWFAST_STORE, else the
    # default file in the user's data directory.
    store_url: str | None = None
    clock: Clock = SYSTEM_CLOCK
    # Cancelled: the run in flight stops as on Ctrl-C (a run driven off the main thread,
    # where signal handlers cannot be installed); None: a token of the run's own.
    cancel: CancelToken | None = None

    # The consoles are made when first used: rich is a good part of what `--help` and
    # `--version` would load, and they never print through them.
    @functools.cached_property
    def out(self) -> Console:
        # markup=False: square brackets in a label or a path ("[/x]") are text, never style
        # (nor a MarkupError); styled parts are rich Text objects. emoji=False: nor is a
        # ":name:" in them an emoji code (a label "nightly :100:" was shown as "nightly 💯").
        from rich.console import Console

        out = Console(
            file=self.stdout,
            highlight=False,
            soft_wrap=False,
            markup=False,
            emoji=False,
            force_terminal=self.terminal,
        )
        if not out.is_terminal:
            # Pipes and files get rich's 80 columns by default: too narrow for result tables.
            out.width = max(out.width, 120)
        return out

    @functools.cached_property
    def err(self) -> Console:
        from rich.console import Console

        return Console(
            file=self.stderr,
            highlight=False,
            stderr=True,
            markup=False,
            emoji=False,
            force_terminal=self.terminal,
        )

    @property
    def interactive(self) -> bool:
        """Progress bars only on a terminal; logs stay one line each otherwise."""
        return self.err.is_terminal

    def input(self) -> BinaryIO:
        """Standard input as bytes (a text stream without bytes under it is encoded)."""
        if self.stdin is not None:
            return self.stdin
        buffer = getattr(sys.stdin, "buffer", None)
        if buffer is not None:
            return buffer  # type: ignore[no-any-return]
        return io.BytesIO(sys.stdin.read().encode())

    def input_is_terminal(self) -> bool:
        """Whether a person may answer a question on standard input."""
        if self.terminal is not None:
            return self.terminal
        stream = self.stdin if self.stdin is not None else sys.stdin
        return bool(getattr(stream, "isatty", lambda: False)())

    def store_display(self) -> str:
        """Where results go without --store, for people (never a password)."""
        from howfast.redact import redact_dsn
        from howfast.store.location import default_store_location

        if self.store_url:
            return redact_dsn(self.store_url)
        return default_store_location(self.environ)

    def service(self, store: str | None = None) -> ServiceEnv:
        """What the services (service/) take of this environment; `store`: --store, else
        the environment's."""
        from howfast.service.env import ServiceEnv

        return ServiceEnv(
            store_url=store if store is not None else self.store_url,
            environ=self.environ,
            clock=self.clock,
            info=self.info,
            cancel=self.cancel,
        )

    def print_json(self, document: JSONValue) -> None:
        """Exactly one JSON document on stdout."""
        self.stdout.write(json.dumps(document, indent=2, sort_keys=False) + "\n")
        self.stdout.flush()

    def info(self, text: str) -> None:
        """A line (or several) on stderr; control characters in it are shown as escapes, and
        connection passwords masked (an event's text is the user's command line)."""
        from howfast.redact import redact_dsn

        line = printable(redact_dsn(text), keep="\n\t")
        if "err" in self.__dict__:  # a progress display may be live on it: print through it
            self.err.print(line)
        else:  # plain text needs no rich (about 40 ms of a dry run's start-up)
            self.stderr.write(line + "\n")
            self.stderr.flush()


# Commands take the environment `main` was given (click's context object); a command called
# by click directly (click.testing.CliRunner) gets this process's.
pass_env = click.make_pass_decorator(CliEnv, ensure=True)


def current_env() -> CliEnv:
    """The environment of the command that runs now (pass_env, for helpers called by it)."""
    return click.get_current_context().ensure_object(CliEnv)
