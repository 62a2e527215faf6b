"""How commands that store a run end: print it (table or JSON) and choose the exit status."""

from __future__ import annotations

from howfast.cli.context import CliEnv
from howfast.errors import ExitStatus
from howfast.report import terminal
from howfast.runner import RunResult
from howfast.service.reading import read_run, run_document
from howfast.store.base import Store

EXIT_FOR_STATUS = {
    "completed": ExitStatus.OK,
    "failed": ExitStatus.ERROR,
    "aborted": ExitStatus.ABORTED,
}


def print_stored_run(env: CliEnv, db: Store, run_id: int, as_json: bool) -> None:
    """Print run `run_id` (the JSON document, or the end-of-run tables) and close the store."""
    try:
        run = read_run(db, run_id, for_people=not as_json)
    finally:
        db.close()
    assert run is not None, f"run {run_id} was just stored"
    if as_json:
        env.print_json(run_document(run))
    else:
        env.out.print(terminal.run_summary(run))


def finish(env: CliEnv, db: Store, result: RunResult, as_json: bool) -> int:
    """After the runner: the run's tables or document, where to find it, the exit status."""
    print_stored_run(env, db, result.run_id, as_json)
    env.info(f"run {result.run_id} {result.status}; see `howfast results show {result.run_id}`")
    return int(EXIT_FOR_STATUS.get(result.status, ExitStatus.ERROR))
