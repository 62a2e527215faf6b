"""`results list` of an up-to-date SQLite store, read with Python's sqlite3 alone.

Opening a store loads SQLAlchemy, which costs a listing more than everything else it does;
listing the runs of a SQLite file is three plain queries. Whenever this cannot answer
exactly as SqlStore.list_runs after open_results would, it answers None and the caller opens
the store as usual: a store that is not a plain existing file (created, or a URL), an older
or damaged schema (migrated, or refused with the reason), a run marked running (its writer
is checked, and the run marked aborted if it is gone: store/liveness.py), any error (then
reported the usual way, in its words)."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path
from urllib.parse import quote

from howfast.model import RunSummary

# migrations.SCHEMA_VERSION and engine.SQLITE_BUSY_TIMEOUT_S, without loading SQLAlchemy;
# tests/unit/test_store_run_list.py checks that they agree.
SCHEMA_VERSION = 6
SQLITE_BUSY_TIMEOUT_S = 30.0


def list_runs(path: Path) -> list[RunSummary] | None:
    """All runs of the SQLite file `path`, newest start time first (ties: last created
    first), as SqlStore.list_runs lists them; None when the store must be opened instead."""
    try:
        db = sqlite3.connect(
            f"file:{quote(str(path))}?mode=ro",
            uri=True,
            timeout=SQLITE_BUSY_TIMEOUT_S,
            isolation_level=None,  # BEGIN below: the three queries read one snapshot
        )
    except sqlite3.Error:
        return None
    try:
        db.execute("BEGIN")
        if db.execute("SELECT version FROM schema_version").fetchall() != [(SCHEMA_VERSION,)]:
            return None
        if db.execute("SELECT 1 FROM runs WHERE status = 'running' LIMIT 1").fetchone():
            return None
        run_rows = db.execute(
            "SELECT id, plan, status, started_at, finished_at, label FROM runs "
            "ORDER BY started_at DESC, id DESC"
        ).fetchall()
        target_names: dict[int, list[str]] = defaultdict(list)
        for run_id, name in db.execute(
            "SELECT run_id, name FROM targets ORDER BY run_id, position"
        ):
            target_names[run_id].append(name)
        step_counts = dict(db.execute("SELECT run_id, count(*) FROM steps GROUP BY run_id"))
    except sqlite3.Error:
        return None
    finally:
        db.close()
    return [
        RunSummary(
            id=run_id,
            plan=plan,
            status=status,
            started_at=started_at,
            finished_at=finished_at,
            label=label,
            targets=tuple(target_names.get(run_id, [])),
            step_count=step_counts.get(run_id, 0),
        )
        for run_id, plan, status, started_at, finished_at, label in run_rows
    ]
