"""The environment a command runs in: where output goes and whether it is a terminal.
Injectable so tests can run commands and read what they printed (as httpie does)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import TextIO

from rich.console import Console

from howfast.model import JSONValue
from howfast.printable import printable


@dataclass
class CliEnv:
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)

    def __post_init__(self) -> None:
        # markup=False: square brackets in a label or a path ("[/x]") are text, never style
        # (nor a MarkupError); styled parts are rich Text objects.
        self.out = Console(file=self.stdout, highlight=False, soft_wrap=False, markup=False)
        if not self.out.is_terminal:
            # Pipes and files get rich's 80 columns by default: too narrow for result tables.
            self.out.width = max(self.out.width, 120)
        self.err = Console(file=self.stderr, highlight=False, stderr=True, markup=False)

    @property
    def interactive(self) -> bool:
        """Progress bars only on a terminal; logs stay one line each otherwise."""
        return self.err.is_terminal

    def print_json(self, document: JSONValue) -> None:
        """Exactly one JSON document on stdout."""
        self.stdout.write(json.dumps(document, indent=2, sort_keys=False) + "\n")
        self.stdout.flush()

    def info(self, text: str) -> None:
        """A line (or several) on stderr; control characters in it are shown as escapes."""
        self.err.print(printable(text, keep="\n\t"))
