"""Options shared by several commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

store_option = click.option(
    "--store",
    metavar="URL",
    help="Results store: a SQLite file path, sqlite:///path or postgresql://... "
    "[default: $HOWFAST_STORE, else howfast.db in your data directory]",
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
    return run_id
