"""pgbench_history: where a surviving load's commits are counted (docs/events.md).

The builtin tpcb-like and simple-update scripts insert one row per transaction, stamped
`mtime = CURRENT_TIMESTAMP` (the transaction's start, on the server's clock, in the session's
time zone). Counted after the load on the surviving primary, the rows of a stretch of time
against the commits pgbench acknowledged in it tell how many acknowledged commits were lost.

Segments run with -n (survive.py), so pgbench's own start-up cleanup is done here, once,
before the first segment: the same statements, each on its own, a missing table ignored as
pgbench ignores it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import psycopg
from psycopg import sql

from howfast.analysis.loadrecord import HistoryCount
from howfast.model import JSONValue
from howfast.targets import pgquery
from howfast.targets.base import Connection

CLEANUP = ("VACUUM pgbench_branches", "VACUUM pgbench_tellers", "TRUNCATE pgbench_history")
COUNTED_MODES = ("tpcb-like", "simple-update")
METHOD = "pgbench_history rows vs acknowledged commits"

_AS_LOCAL = "to_timestamp(%s) AT TIME ZONE current_setting('TimeZone')"
Window = tuple[float | None, float | None]  # [lo, hi) in seconds of the load; None: unbounded


def not_counted(params: Mapping[str, JSONValue]) -> str | None:
    """Why a step's lost commits cannot be counted; None when they can."""
    mode = params.get("mode", "tpcb-like")
    if mode in COUNTED_MODES:
        return None
    if mode == "select-only":
        return "select-only commits nothing"
    return "custom scripts: no table records one row per commit; not counted"


def reset(conn: Connection) -> list[str]:
    """pgbench's start-up cleanup; the statements that failed, with why (a missing table)."""
    problems = []
    with pgquery.connect(conn) as db:
        for statement in CLEANUP:
            try:
                db.execute(statement)
            except psycopg.Error as exc:
                problems.append(f"{statement}: {str(exc).strip().splitlines()[0]}")
    return problems


def count_query(windows: Sequence[Window], origin_epoch: float) -> tuple[sql.Composed, list[float]]:
    """One query counting the rows of each window: mtime compared with the window's bounds as
    timestamps in the session's time zone (the one pgbench's sessions stamped them in)."""
    columns = []
    params: list[float] = []
    for lo, hi in windows:
        conditions = []
        for bound, op in ((lo, ">="), (hi, "<")):
            if bound is not None:
                conditions.append(sql.SQL(f"mtime {op} ({_AS_LOCAL})"))
                params.append(origin_epoch + bound)
        where = sql.SQL(" AND ").join(conditions) if conditions else sql.SQL("true")
        columns.append(sql.SQL("count(*) FILTER (WHERE {})").format(where))
    query = sql.SQL("SELECT {} FROM pgbench_history").format(sql.SQL(", ").join(columns))
    return query, params


def count_rows(
    conn: Connection, windows: Sequence[Window], origin_epoch: float
) -> tuple[HistoryCount, ...]:
    """The rows of each window, in one query on the (surviving) server."""
    if not windows:
        return ()
    query, params = count_query(windows, origin_epoch)
    with pgquery.connect(conn) as db:
        row = db.execute(query, params).fetchone()
    assert row is not None
    return tuple(
        HistoryCount(lo, hi, int(str(n))) for (lo, hi), n in zip(windows, row, strict=True)
    )
