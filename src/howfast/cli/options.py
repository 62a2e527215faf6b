"""Options shared by several commands."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from howfast.outfile import STDOUT, OutputFile, output_file
from howfast.printable import first_unsafe

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from howfast.cli.context import CliEnv

F = TypeVar("F", bound=Callable[..., Any])

# SQLite's integers (and PostgreSQL's bigint): a larger id cannot name a stored run.
MAX_RUN_ID = 2**63 - 1


RAW_ARGS = "howfast.raw_args"  # click context meta: the arguments of `run` as given


class RawArgsCommand(click.Command):
    """A command that keeps its arguments as given (`run --in-cluster`: the Job runs
    `howfast run` with them, cli/in_cluster.py)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[RAW_ARGS] = list(args)
        return super().parse_args(ctx, args)


class LazyHelpOption(click.Option):
    """An option whose help text is made when it is shown (`lazy_help`), not when the command
    is declared: `run --event`'s lists every event action, and finding them imports each
    action's module and all it uses, which a command that shows no help need not pay."""

    def __init__(self, *args: Any, lazy_help: Callable[[], str], **kwargs: Any) -> None:
        self._lazy_help: Callable[[], str] | None = lazy_help
        self._help: str | None = None
        super().__init__(*args, **kwargs)

    @property
    def help(self) -> str | None:
        if self._lazy_help is not None:
            self._help, self._lazy_help = inspect.cleandoc(self._lazy_help()), None
        return self._help

    @help.setter
    def help(self, value: str | None) -> None:
        self._help = value


def path_problem(text: str) -> str | None:
    """Why `text` cannot be a path howfast uses, or None. An empty or blank value is most
    often an unset shell variable (`--target "$DIR"`): taken as it is, it would mean the
    current directory. A control character (a newline pasted in) makes a file name nobody
    can read back in a listing, nor a postgresql.conf line."""
    if not text:
        return "the value is empty (an unset shell variable?): give a path"
    if not text.strip():
        return f"{text!r} is only blanks: give a path"
    found = first_unsafe(text)
    if found is not None:
        index, shown = found
        return (
            f"{text!r} contains a control character ({shown} at character {index + 1}): "
            "give a path without it"
        )
    return None


def check_path_value(ctx: click.Context | None, param: click.Parameter | None, value: Any) -> Any:
    """A click callback refusing empty, blank and control-character paths (one value, or
    the tuple of a repeatable option); '-' (stdin) and None (not given) pass."""
    del ctx
    for text in value if isinstance(value, tuple) else (value,):
        if text is None or text == "-":
            continue
        problem = path_problem(str(text))
        if problem:
            raise click.BadParameter(problem, param=param)
    return value


def checked_path(ctx: click.Context | None, param: click.Parameter | None, value: Any) -> Any:
    """check_path_value, then the value as a Path (None stays None)."""
    check_path_value(ctx, param, value)
    return None if value is None else Path(value)


def output_value(
    ctx: click.Context | None, param: click.Parameter | None, value: Any
) -> OutputFile | None:
    """A click callback for the file a command writes (-o): None for standard output ('-',
    or not given), else the destination checked by the rule of outfile.py (a regular file or
    a new name, a link only to a regular file, no control character)."""
    check_path_value(ctx, param, value)
    if value is None or value == STDOUT:
        return None
    option = param.opts[0] if param is not None and param.opts else "-o"
    return output_file(str(value), option)


def say_where(env: CliEnv, output: OutputFile | None) -> None:
    """Before a file is written through a symbolic link: which file that is, on stderr."""
    note = output.note() if output is not None else None
    if note:
        env.info(note)


store_option = click.option(
    "--store",
    metavar="URL",
    callback=check_path_value,
    help="Results store: a SQLite file path, sqlite:///path or postgresql://... "
    "[default: $HOWFAST_STORE, else howfast.db in your data directory]",
)


def _failure_slo(ctx: click.Context | None, param: click.Parameter | None, value: Any) -> Any:
    from howfast.slo import parse_failure_slo

    return None if value is None else parse_failure_slo(value)


slo_option = click.option(
    "--slo",
    metavar="rto=10s,rpo=0",
    callback=_failure_slo,
    help="Failure objectives every trial must meet (rto: the longest outage, rpo: the most "
    "commits lost), instead of the ones stored with the run (run --slo).",
)
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print exactly one JSON document on stdout."
)


def parse_run_id(value: str) -> int:
    try:
        run_id = int(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a run id (see `howfast results list`)"
        ) from None
    if run_id < 1:
        raise click.BadParameter(f"{value!r} is not a run id (see `howfast results list`)")
    if run_id > MAX_RUN_ID:
        raise click.BadParameter(
            f"{value!r} is not a run id: run ids go up to {MAX_RUN_ID} (see `howfast results list`)"
        )
    return run_id


OptionsT = TypeVar("OptionsT", bound="DataclassInstance")


def gathered(
    options_type: type[OptionsT],
) -> Callable[[Callable[[CliEnv, OptionsT], int]], Callable[..., int]]:
    """Click passes a command's options as keyword arguments, one parameter each; this
    gathers them into one frozen dataclass (`options_type`, a field per option) so the command
    takes one typed value. The options it has no field for (the target kinds' own,
    declared by targets/kinds/) go into its `kind_given` field, as given.

        @pass_env
        @gathered(RunOptions)
        def run_command(env: CliEnv, options: RunOptions) -> int: ..."""
    named = frozenset(field.name for field in dataclasses.fields(options_type)) - {"kind_given"}

    def decorate(command: Callable[[CliEnv, OptionsT], int]) -> Callable[..., int]:
        @functools.wraps(command)
        def take_options(env: CliEnv, /, **given: Any) -> int:
            own: dict[str, Any] = {k: v for k, v in given.items() if k in named}
            own["kind_given"] = {k: v for k, v in given.items() if k not in named}
            return command(env, options_type(**own))

        return take_options

    return decorate
