"""Wait events of the benchmark's sessions, sampled at 10 Hz: what PostgreSQL's backends were
doing (on CPU, waiting for a WAL flush, a data file read, a lock...) while the step ran.

Source: `pg_stat_activity`, on a connection of its own (`application_name` `howfast-waits`):
the client backends of the benchmark's database, howfast's own sessions left out. An active
backend with no wait event is on CPU (or waiting for something PostgreSQL does not
instrument). When the `pg_wait_sampling` extension is installed in that database, its profile
(sampled inside the server every 10 ms) is read instead, once a second; `source` says which.

What is stored is raw: per-second counts of samples by wait event type (series `waits.<type>`,
with `waits.samples`, the number of readings in that second) and the step's counts per wait
event (`postgres.wait_sampling`). Shares and the verdict are derived when the run is read
(analysis/why.py). Parsing and counting are pure functions, tested with recorded rows.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg

from howfast.model import JSONValue, Sample
from howfast.plugin.workload import WorkloadPlugin
from howfast.samplers.base import PeriodicSampler, SamplerContext, SamplerResult
from howfast.samplers.own_connection import OwnConnection
from howfast.samplers.plugin import SamplerPlugin, SamplerSetup
from howfast.samplers.prepared import prepare, text_rows

WAIT_INTERVAL_S = 0.1  # 10 Hz
PROFILE_INTERVAL_S = 1.0  # pg_wait_sampling samples by itself; its profile is read at 1 Hz
APPLICATION = "howfast-waits"
CPU = "CPU"  # an active session without a wait event

ACTIVITY_QUERY = (
    "SELECT pid, datname, backend_type, application_name, state, wait_event_type, wait_event "
    "FROM pg_catalog.pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_catalog.pg_backend_pid() "
    "AND backend_type = 'client backend'"
)
ACTIVITY_COLUMNS = (
    "pid",
    "datname",
    "backend_type",
    "application_name",
    "state",
    "wait_event_type",
    "wait_event",
)
PROFILE_QUERY = (
    "SELECT p.pid, p.event_type, p.event, sum(p.count)::bigint "
    "FROM pg_wait_sampling_profile p JOIN pg_catalog.pg_stat_activity a ON a.pid = p.pid "
    "WHERE a.datname = current_database() AND a.pid <> pg_catalog.pg_backend_pid() "
    "AND a.backend_type = 'client backend' "
    "AND coalesce(a.application_name, '') NOT LIKE 'howfast%' "
    "GROUP BY 1, 2, 3"
)


def wait_key(wait_event_type: object, wait_event: object) -> str:
    """'IO:WALSync', 'Lock:transactionid', or 'CPU' when there is no wait event."""
    if not wait_event_type:
        return CPU
    return f"{wait_event_type}:{wait_event or ''}"


def key_type(key: str) -> str:
    return key.split(":", 1)[0]


@dataclass
class Tally:
    """What one reading of pg_stat_activity saw."""

    active: Counter[str] = field(default_factory=Counter)  # wait key -> active sessions
    states: Counter[str] = field(default_factory=Counter)  # state -> sessions


def ours(row: Mapping[str, Any], database: str | None, own_pid: int | None) -> bool:
    """A session of the benchmark: a client backend of its database, not howfast's own."""
    if row.get("backend_type") not in (None, "client backend"):
        return False
    if database is not None and row.get("datname") != database:
        return False
    if own_pid is not None and row.get("pid") == own_pid:
        return False
    return not str(row.get("application_name") or "").startswith("howfast")


def tally_activity(
    rows: Iterable[Mapping[str, Any]], database: str | None = None, own_pid: int | None = None
) -> Tally:
    """Count the benchmark's sessions by state, and its active ones by wait event.
    `rows` are pg_stat_activity rows (as row_to_json gives them, or the sampler's columns);
    rows of other databases, other backend types and howfast's sessions are left out."""
    out = Tally()
    for row in rows:
        if not ours(row, database, own_pid):
            continue
        state = str(row.get("state") or "unknown")
        out.states[state] += 1
        if state == "active":
            out.active[wait_key(row.get("wait_event_type"), row.get("wait_event"))] += 1
    return out


def profile_increments(
    previous: Mapping[tuple[int, str], int], rows: Iterable[tuple[Any, Any, Any, Any]]
) -> tuple[Counter[str], dict[tuple[int, str], int]]:
    """pg_wait_sampling_profile rows (pid, event_type, event, count; cumulative per backend)
    -> (samples added since `previous`, the new cumulative counts). A backend not seen before
    counts from zero; Client waits (idle sessions waiting for their client) are left out."""
    added: Counter[str] = Counter()
    now: dict[tuple[int, str], int] = {}
    for pid, event_type, event, count in rows:
        key = wait_key(event_type, event)
        if key_type(key) == "Client":
            continue
        now[(int(pid), key)] = int(count)
        grown = int(count) - previous.get((int(pid), key), 0)
        if grown > 0:
            added[key] += grown
    return added, now


@dataclass
class Second:
    """Readings within one second of the step."""

    samples: int = 0
    types: Counter[str] = field(default_factory=Counter)


def per_second_series(seconds: Mapping[int, Second]) -> dict[str, list[Sample]]:
    """Raw counts per second: `waits.samples` (readings) and `waits.<type>` (active sessions
    seen in that wait event type, summed over the readings), stamped at the second's end."""
    types = sorted({t for s in seconds.values() for t in s.types})
    series: dict[str, list[Sample]] = {"waits.samples": []}
    for name in types:
        series[f"waits.{name}"] = []
    for second in sorted(seconds):
        s = seconds[second]
        series["waits.samples"].append(Sample(float(second), float(s.samples)))
        for name in types:
            series[f"waits.{name}"].append(Sample(float(second), float(s.types.get(name, 0))))
    return series


class WaitEventSampler(PeriodicSampler):
    name = "waits"

    def __init__(self) -> None:
        super().__init__()
        self.interval_s = WAIT_INTERVAL_S
        self.own = OwnConnection(APPLICATION, "2s")
        self.db: psycopg.Connection[tuple[object, ...]] | None = None
        self.source = "pg_stat_activity"
        self.database: str | None = None
        self.own_pid: int | None = None
        self.ticks = 0
        self.counts: Counter[str] = Counter()
        self.states: Counter[str] = Counter()
        self.sessions_max = 0
        self.seconds: dict[int, Second] = {}
        self.profile: dict[tuple[int, str], int] = {}

    def begin(self, ctx: SamplerContext) -> None:
        profile = self._connect(ctx)
        if profile:
            self.source = "pg_wait_sampling"
            self.interval_s = PROFILE_INTERVAL_S
            _, self.profile = profile_increments({}, self._profile_rows())

    def resume(self, ctx: SamplerContext) -> bool:
        """After an event cut the connection: a new one to the current primary, reading the
        same source (a promoted standby is a copy: the same extensions)."""
        self._connect(ctx, self.source == "pg_wait_sampling")
        return True

    def _connect(self, ctx: SamplerContext, profile: bool | None = None) -> bool:
        """A connection of its own with the statement prepared; whether the server has the
        pg_wait_sampling profile (`profile`: the source already chosen)."""
        self.db = self.own.open(ctx.current_connection(), ctx.own_connections)
        row = self.db.execute(
            "SELECT current_database(), pg_backend_pid(), "
            "to_regclass('pg_wait_sampling_profile') IS NOT NULL"
        ).fetchone()
        assert row is not None
        self.database, self.own_pid = str(row[0]), int(str(row[1]))
        has_profile = bool(row[2]) if profile is None else profile
        prepare(self.db.pgconn, STATEMENT, PROFILE_QUERY if has_profile else ACTIVITY_QUERY)
        return has_profile

    def tick(self, t: float) -> None:
        # Read first: a reading that fails (the server restarting) counts nowhere.
        if self.source == "pg_wait_sampling":
            added, self.profile = profile_increments(self.profile, self._profile_rows())
            second = self._second(t)
            self.counts.update(added)
            second.types.update(Counter({key_type(k): n for k, n in added.items()}))
            return
        rows = self._rows()
        second = self._second(t)
        tally = tally_activity(
            (dict(zip(ACTIVITY_COLUMNS, r, strict=True)) for r in rows),
            self.database,
            self.own_pid,
        )
        self.counts.update(tally.active)
        self.states.update(tally.states)
        self.sessions_max = max(self.sessions_max, sum(tally.states.values()))
        for key, n in tally.active.items():
            second.types[key_type(key)] += n

    def _second(self, t: float) -> Second:
        """The second a reading at t falls in, with the reading counted."""
        second = self.seconds.setdefault(max(1, math.ceil(t)), Second())
        self.ticks += 1
        second.samples += 1
        return second

    def _rows(self) -> list[tuple[str | None, ...]]:
        """One reading: ten a second, so the prepared statement read as text through libpq
        (samplers/prepared.py; text is all the tally needs)."""
        assert self.db is not None
        return text_rows(self.db.pgconn, STATEMENT)

    def _profile_rows(self) -> list[tuple[Any, Any, Any, Any]]:
        return [(r[0], r[1], r[2], r[3]) for r in self._rows()]

    def stop(self) -> SamplerResult:
        out = super().stop()
        self.own.release(self.finished)
        self.db = None
        return out

    def result(self) -> SamplerResult:
        out = SamplerResult()
        section: dict[str, JSONValue] = {
            "source": self.source,
            "interval_s": self.interval_s,
            "readings": self.ticks,
            "missed_readings": self.missed_readings,
            "reconnects": self.reconnects,
            "active_samples": sum(self.counts.values()),
            "counts": dict(self.counts.most_common()),
        }
        if self.source == "pg_stat_activity":
            section["states"] = dict(self.states.most_common())
            section["sessions_max"] = self.sessions_max
        out.sections["postgres"] = {"wait_sampling": section}
        out.series.update(per_second_series(self.seconds))
        return out


STATEMENT = b"howfast_waits"


def _create(setup: SamplerSetup) -> WaitEventSampler | None:
    return WaitEventSampler() if setup.connection is not None else None


def _watches(workload: WorkloadPlugin[Any]) -> bool:
    """Steps whose client sessions do the work (pgbench's): their wait events say what
    limited it."""
    return workload.sampled and workload.drives_sessions


# On a target with a server (samplers/registry.py).
SAMPLER = SamplerPlugin("waits", _create, watches=_watches, order=35, sections=("postgres",))
