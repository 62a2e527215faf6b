"""Opening the results store for a command or a run, and closing the runs that a killed
howfast left `running` (their process cannot do it: SIGKILL, the OOM killer, a power cut)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from howfast.errors import HowfastError
from howfast.store import open_store
from howfast.store.liveness import close_abandoned_runs
from howfast.store.location import plain_sqlite_file

if TYPE_CHECKING:
    from howfast.model import RunSummary
    from howfast.service.env import ServiceEnv
    from howfast.store.sql import SqlStore


def open_results(env: ServiceEnv, url: str | None, *, reading: bool = False) -> SqlStore:
    """open_store(url, else the environment's store), then mark aborted the runs whose
    howfast process is gone, saying so. `reading`: a command that only reads (a store it
    cannot write is opened read-only, and left as it is)."""
    db = open_store(url if url is not None else env.store_url, reading=reading, environ=env.environ)
    if db.read_only:
        return db
    try:
        abandoned = close_abandoned_runs(db)
    except HowfastError as exc:  # e.g. a read-only copy of a store: reading still works
        env.info(f"warning: cannot check the store for runs left running: {exc}")
        return db
    for run in abandoned:
        env.info(
            f"run {run.run_id} was still marked running, but its howfast process "
            f"(PID {run.writer.pid}) is gone: it was killed or the machine restarted. "
            "Marked aborted; its stored steps are kept."
        )
    return db


def list_runs(env: ServiceEnv, url: str | None) -> list[RunSummary]:
    """The stored runs, newest first (`results list`): of an up-to-date SQLite file without
    loading SQLAlchemy when nothing needs it (store/run_list.py), else through open_results."""
    from howfast.store import run_list  # sqlite3: loaded to list runs, not for a dry run

    path = plain_sqlite_file(url if url is not None else env.store_url, env.environ)
    runs = run_list.list_runs(path) if path is not None else None
    if runs is not None:
        return runs
    db = open_results(env, url, reading=True)
    try:
        return db.list_runs()
    finally:
        db.close()
