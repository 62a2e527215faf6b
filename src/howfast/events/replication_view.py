"""What the primary and a standby say of their replication while a `partition` cuts it
(events/partition.py): one reading, and a watcher that keeps the worst of them.

A reading is the standby's pg_stat_replication row on the primary (its state, sync state, the
WAL the primary wrote that the standby has not flushed), how many of the primary's backends
wait on SyncRep (commits waiting for a synchronous standby), and the standby's own last
received LSN (its walreceiver). A reading that fails (the primary killed by a failover, the
standby promoted) is missed, not an error.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from howfast.errors import HowfastError
from howfast.model import JSONValue
from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.replicas.builders import STATE_QUERY
from howfast.targets.replicas.state import parse_state

SYNCREP_QUERY = "SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE wait_event = 'SyncRep'"
RECEIVED_QUERY = "SELECT pg_wal_lsn_diff(coalesce(pg_last_wal_receive_lsn(), '0/0'), '0/0')::bigint"
WATCH_EVERY_S = 0.5


@dataclass(frozen=True)
class Reading:
    at: float  # time.monotonic()
    state: str | None  # None: the standby has no row (not connected); "unknown": no answer
    sync_state: str | None = None
    current_lsn: int | None = None  # the primary's
    flush_lsn: int | None = None  # the standby's, as the primary last heard of it
    syncrep_waiting: int | None = None
    received_lsn: int | None = None  # the standby's own walreceiver

    @property
    def unflushed_bytes(self) -> int | None:
        if self.current_lsn is None or self.flush_lsn is None:
            return None
        return max(0, self.current_lsn - self.flush_lsn)

    def document(self) -> dict[str, JSONValue]:
        return {
            "state": self.state or "not connected",
            "sync_state": self.sync_state,
            "primary_lsn": self.current_lsn,
            "standby_flush_lsn": self.flush_lsn,
            "unflushed_bytes": self.unflushed_bytes,
            "syncrep_waiting": self.syncrep_waiting,
            "standby_received_lsn": self.received_lsn,
        }


def read(primary: Connection, standby: str, standby_conn: Connection | None) -> Reading:
    import psycopg  # here: finding the actions (`--event`'s help) must not load the driver

    now = time.monotonic()
    try:
        with pgquery.connect(primary, timeout_s=3) as db:
            states = parse_state(db.execute(STATE_QUERY).fetchall())
            row = db.execute(SYNCREP_QUERY).fetchone()
            waiting = int(str(row[0])) if row else None
            current = db.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"
            ).fetchone()
    except (HowfastError, psycopg.Error, ValueError):
        return Reading(now, "unknown", received_lsn=received(standby_conn))
    seen = states.get(standby)
    return Reading(
        now,
        seen.state if seen else None,
        sync_state=seen.sync_state if seen else None,
        current_lsn=int(str(current[0])) if current else None,
        flush_lsn=seen.flush_lsn if seen else None,
        syncrep_waiting=waiting,
        received_lsn=received(standby_conn),
    )


def received(conn: Connection | None) -> int | None:
    """The standby's last received WAL position; None when it does not answer (or is no
    standby any more: promoted)."""
    import psycopg

    if conn is None:
        return None
    try:
        with pgquery.connect(conn, timeout_s=3) as db:
            row = db.execute(RECEIVED_QUERY).fetchone()
    except (HowfastError, psycopg.Error):
        return None
    return int(str(row[0])) if row and row[0] else None


class Watcher:
    """Reads every WATCH_EVERY_S in a thread of its own while the cut lasts: the worst lag,
    the most commits waiting. `at_deadline` runs once when `deadline()` (monotonic) passes."""

    def __init__(
        self,
        reading: Callable[[], Reading],
        *,
        deadline: float | None = None,
        at_deadline: Callable[[], None] | None = None,
    ) -> None:
        self._reading = reading
        self._deadline = deadline
        self._at_deadline = at_deadline
        self._stop = threading.Event()
        self.readings = 0
        self.missed = 0
        self.unflushed_max: int | None = None
        self.syncrep_max: int | None = None
        self.last: Reading | None = None
        self._thread = threading.Thread(target=self._run, name="howfast-partition", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(WATCH_EVERY_S):
            if self._deadline is not None and time.monotonic() >= self._deadline:
                self._deadline = None
                if self._at_deadline is not None:
                    self._at_deadline()
            found = self._reading()
            if found.state == "unknown":
                self.missed += 1
                continue
            self.readings += 1
            self.last = found
            self.unflushed_max = _max(self.unflushed_max, found.unflushed_bytes)
            self.syncrep_max = _max(self.syncrep_max, found.syncrep_waiting)

    def document(self) -> dict[str, JSONValue]:
        return {
            "readings": self.readings,
            "missed_readings": self.missed,
            "unflushed_bytes_max": self.unflushed_max,
            "syncrep_waiting_max": self.syncrep_max,
        }


def _max(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)
