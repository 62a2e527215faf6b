"""Opening the results store for a command (service/stores.py, in the command's
environment)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from howfast.cli.context import CliEnv
from howfast.service import stores

if TYPE_CHECKING:
    from howfast.model import RunSummary
    from howfast.store.sql import SqlStore


def open_results(env: CliEnv, url: str | None, *, reading: bool = False) -> SqlStore:
    """The store of --store (`url`), else of the environment; the runs a killed howfast
    left running are marked aborted, saying so. `reading`: a command that only reads."""
    return stores.open_results(env.service(url), None, reading=reading)


def list_runs(env: CliEnv, url: str | None) -> list[RunSummary]:
    """The runs of the store of --store (`url`), else of the environment, newest first."""
    return stores.list_runs(env.service(url), None)
