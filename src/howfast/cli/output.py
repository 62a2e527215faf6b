"""How commands that run or store a run show it: the dry run, the progress display, the
finished run (table or JSON) and the exit status."""

from __future__ import annotations

import io

from howfast.cli.context import CliEnv
from howfast.errors import ExitStatus
from howfast.model import RunRecord
from howfast.redact import redact_dsn, redact_nested
from howfast.service.prepared import FinishedRun, PreparedRun, ProgressDisplay
from howfast.store.base import Store

EXIT_FOR_STATUS = {
    "completed": ExitStatus.OK,
    "failed": ExitStatus.ERROR,
    "aborted": ExitStatus.ABORTED,
}


def print_dry_run(env: CliEnv, prepared: PreparedRun, as_json: bool) -> int:
    """--dry-run: what each target would run, as data or as commands one would type."""
    # what the user typed (an exec event's command line) may hold a connection password:
    # the dry run is pasted into tickets, so it shows every connection string masked
    if as_json:
        env.print_json(redact_nested(prepared.dry_run_document()))
    else:
        text = io.StringIO()
        prepared.write_dry_run(text)
        env.stdout.write(redact_dsn(text.getvalue()))
    return 0


def progress(env: CliEnv, prepared: PreparedRun) -> ProgressDisplay:
    """The progress display of a run: per step, or per class for a fleet; its ETA is the
    run's (PreparedRun.expected_s)."""
    # The progress displays and the run's tables load only for a run, never for a dry run.
    from howfast.cli.fleet_progress import FleetProgressObserver
    from howfast.cli.progress import ProgressObserver

    if prepared.shape == "fleet":
        return FleetProgressObserver(env, prepared.expected_s)
    return ProgressObserver(env, prepared.expected_s)


def print_run(env: CliEnv, run: RunRecord, as_json: bool) -> None:
    """A stored run, derived: its JSON document, or its end-of-run tables."""
    from howfast.report import terminal
    from howfast.service.reading import run_document

    if as_json:
        env.print_json(run_document(run))
    else:
        env.out.print(terminal.run_summary(run))


def print_stored_run(env: CliEnv, db: Store, run_id: int, as_json: bool) -> None:
    """Print run `run_id` (the JSON document, or the end-of-run tables) and close the store."""
    from howfast.service.reading import read_run

    try:
        run = read_run(db, run_id, for_people=not as_json)
    finally:
        db.close()
    assert run is not None, f"run {run_id} was just stored"
    print_run(env, run, as_json)


def finish(env: CliEnv, finished: FinishedRun, as_json: bool) -> int:
    """After a run: its tables or document, where to find it, the exit status."""
    print_run(env, finished.run, as_json)
    env.info(
        f"run {finished.run_id} {finished.status}; see `howfast results show {finished.run_id}`"
    )
    return int(EXIT_FOR_STATUS.get(finished.status, ExitStatus.ERROR))
