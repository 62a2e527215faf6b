"""The target kinds' own options (targets/kind.py's OptionSpec), as click options of `howfast
run` and `howfast probe`: declared by each kind, collected here without naming any."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click

from howfast.targets.kind import Command
from howfast.targets.registry import kind_options

F = TypeVar("F", bound=Callable[..., Any])


def target_kind_options(command: Command) -> Callable[[F], F]:
    """Every kind's options that `command` has, in the kinds' order."""

    def decorate(fn: F) -> F:
        for _, spec in reversed(kind_options(command)):
            fn = click.option(spec.flag, spec.name, metavar=spec.metavar, help=spec.help)(fn)
        return fn

    return decorate


def kind_values(command: Command, given: Mapping[str, Any]) -> dict[str, str | None]:
    """The kinds' options' values from the command's keyword arguments (None: not given)."""
    return {spec.name: given.get(spec.name) for _, spec in kind_options(command)}
