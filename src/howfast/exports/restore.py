"""`howfast import run`: a run of a run file stored again, under a new id, with where it
came from. A thin executor over the Store interface: the file was read and checked whole
(runfile.py) before anything is written."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace

from howfast.clock import now as clock_now
from howfast.exports.runfile import ExportedRun
from howfast.model import JSONValue
from howfast.store.base import Store


def with_provenance(
    environment: dict[str, JSONValue], hop: dict[str, JSONValue]
) -> dict[str, JSONValue]:
    """The environment with this import appended to its `provenance` list: a run exported
    again from a store it was imported into keeps every hop, oldest first."""
    earlier = environment.get("provenance")
    hops = list(earlier) if isinstance(earlier, list) else []
    return {**environment, "provenance": [*hops, hop]}


def restore_run(
    store: Store,
    exported: ExportedRun,
    *,
    writer: dict[str, JSONValue] | None = None,
    now: Callable[[], str] = clock_now,
) -> int:
    """Store the run with its targets, steps, series and histograms as they were stored, and
    its status and times; return the new id. `writer` (store/liveness.py) lets a later
    howfast mark the copy aborted if this process is killed while it writes. Interrupted
    (Ctrl-C, a store error), the partial copy is deleted: the file still holds the run."""
    run = exported.run
    environment = with_provenance(run.environment, exported.provenance.document(now()))
    run_id = store.create_run(run.plan, environment, run.started_at, run.label, writer)
    try:
        for target in run.targets:
            store.add_target(run_id, target)
        for step in run.steps:
            store.add_step(run_id, replace(step, id=None))
        store.finish_run(run_id, run.status, run.finished_at or run.started_at)
    except BaseException:
        with contextlib.suppress(Exception):  # else the writer marks it aborted later
            store.delete_run(run_id)
        raise
    return run_id
