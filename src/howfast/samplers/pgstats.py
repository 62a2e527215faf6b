"""PostgreSQL's cumulative statistics views, read once per tick on a connection of their own.

Which views exist depends on the version (pg_stat_wal 14+, pg_stat_io 16+,
pg_stat_checkpointer 17+, where the checkpoint columns of pg_stat_bgwriter went), and their
columns change too; a view the server lacks is skipped and said so, never an error. All views
are read in one query returning JSON, so a tick is one round trip whatever the version.

The choice of views, the query and the deltas are pure functions, tested with recorded rows.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import psycopg

from howfast.model import JSONValue, Sample
from howfast.samplers.base import PeriodicSampler, SamplerContext, SamplerResult
from howfast.samplers.own_connection import OwnConnection
from howfast.samplers.plugin import SamplerPlugin, SamplerSetup
from howfast.targets.base import Connection


@dataclass(frozen=True)
class View:
    name: str
    since: int  # server_version_num of the first release that has it
    where: str = ""  # row filter
    many: bool = False  # one row per (backend_type, object, context) instead of one row


VIEWS = (
    View("pg_stat_wal", 140000),
    View("pg_stat_bgwriter", 0),
    View("pg_stat_checkpointer", 170000),
    View("pg_stat_io", 160000, many=True),
    View("pg_stat_database", 0, where="datname = current_database()"),
)
SETTLE_S = 1.0  # longest wait at the end of a step for its sessions' last statistics
SETTLE_QUIET_S = 0.05
# Settings recorded with each step: the ones that shape checkpoints and WAL, which a plan's
# per-step settings may change between steps.
STEP_SETTINGS = (
    "checkpoint_completion_target",
    "checkpoint_timeout",
    "max_wal_size",
    "shared_buffers",
    "synchronous_commit",
    "fsync",
    "wal_sync_method",
    "full_page_writes",
    "wal_compression",
)
# Columns that are levels or labels, not counters: reported as read at the end, not as deltas.
NOT_COUNTERS = frozenset({"datid", "numbackends", "op_bytes"})
IO_KEY = ("backend_type", "object", "context")


def _release(version_num: int) -> str:
    return str(version_num // 10000)


def choose_views(version_num: int) -> tuple[list[View], dict[str, str]]:
    """(views to read, {skipped view: why}) for a server version."""
    chosen, skipped = [], {}
    for view in VIEWS:
        if version_num >= view.since:
            chosen.append(view)
        else:
            skipped[view.name] = f"needs PostgreSQL {_release(view.since)} or later"
    return chosen, skipped


def build_query(views: list[View]) -> str:
    """One SELECT returning a JSON object: view name -> row (or list of rows), plus the WAL
    insert position in bytes (None on a standby, where there is no insert position)."""
    parts = []
    for view in views:
        where = f" WHERE {view.where}" if view.where else ""
        row = "json_agg(v)" if view.many else "row_to_json(v)"
        parts.append(f"'{view.name}', (SELECT {row} FROM pg_catalog.{view.name} v{where})")
    parts.append(
        "'wal_lsn_bytes', CASE WHEN pg_catalog.pg_is_in_recovery() THEN NULL ELSE "
        "pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_insert_lsn(), '0/0') END"
    )
    return "SELECT json_build_object(" + ", ".join(parts) + ")"


def _number(value: object) -> float | int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return None


def counters(row: dict[str, Any] | None) -> dict[str, float | int]:
    """The numeric columns of a row (timestamps, names and nulls left out)."""
    out: dict[str, float | int] = {}
    for name, value in (row or {}).items():
        number = _number(value)
        if number is not None:
            out[name] = number
    return out


def io_rows(rows: list[dict[str, Any]] | None) -> dict[str, dict[str, float | int]]:
    """pg_stat_io rows keyed 'backend_type/object/context'."""
    return {"/".join(str(r.get(k)) for k in IO_KEY): counters(r) for r in rows or []}


@dataclass
class Snapshot:
    t: float
    views: dict[str, dict[str, float | int]]  # single-row views: column -> value
    io: dict[str, dict[str, float | int]]  # pg_stat_io: row key -> column -> value
    wal_lsn_bytes: int | None
    # Readings whose counters continue one another: a new stretch starts when an event
    # (issue 29) reset them (a crash) or moved the sampler to another server (a failover).
    stretch: int = 0
    after_gap: bool = False  # the first reading after an outage: no rate over the outage


def parse_snapshot(t: float, document: dict[str, Any]) -> Snapshot:
    views = {
        name: counters(row)
        for name, row in document.items()
        if name not in ("pg_stat_io", "wal_lsn_bytes") and isinstance(row, dict)
    }
    lsn = _number(document.get("wal_lsn_bytes"))
    return Snapshot(t, views, io_rows(document.get("pg_stat_io")), int(lsn) if lsn else None)


def row_delta(
    before: dict[str, float | int], after: dict[str, float | int]
) -> tuple[dict[str, float | int], bool]:
    """(counter differences, whether any went backwards: statistics reset meanwhile).
    Levels such as numbackends are given as read at the end."""
    out: dict[str, float | int] = {}
    went_back = False
    for name, value in after.items():
        if name in NOT_COUNTERS or name not in before:
            out[name] = value
            continue
        diff = value - before[name]
        if diff < 0:
            went_back = True
            diff = 0
        out[name] = round(diff, 3) if isinstance(diff, float) else diff
    return out, went_back


def snapshot_delta(first: Snapshot, last: Snapshot) -> tuple[dict[str, JSONValue], list[str]]:
    """Per view, what changed between two snapshots; pg_stat_io rows that did nothing are
    left out. Returns (views, names of views whose statistics were reset)."""
    views: dict[str, JSONValue] = {}
    reset = []
    for name, after in last.views.items():
        diff, went_back = row_delta(first.views.get(name, {}), after)
        views[name] = diff
        if went_back:
            reset.append(name)
    if last.io:
        rows = []
        for key, after in last.io.items():
            diff, went_back = row_delta(first.io.get(key, {}), after)
            if went_back:
                reset.append("pg_stat_io")
            if any(v for k, v in diff.items() if k not in NOT_COUNTERS):
                rows.append({**dict(zip(IO_KEY, key.split("/"), strict=False)), **diff})
        views["pg_stat_io"] = rows
    return views, sorted(set(reset))


# (series name, view, column candidates: the first present is used, across versions)
SERIES = (
    ("pg.wal_records_per_s", "pg_stat_wal", ("wal_records",)),
    ("pg.wal_fpi_per_s", "pg_stat_wal", ("wal_fpi",)),
    ("pg.wal_syncs_per_s", "pg_stat_wal", ("wal_sync",)),
    ("pg.checkpoint_buffers_per_s", "pg_stat_checkpointer", ("buffers_written",)),
    ("pg.checkpoint_buffers_per_s", "pg_stat_bgwriter", ("buffers_checkpoint",)),
    ("pg.bgwriter_buffers_per_s", "pg_stat_bgwriter", ("buffers_clean",)),
    ("pg.commits_per_s", "pg_stat_database", ("xact_commit",)),
    ("pg.blks_read_per_s", "pg_stat_database", ("blks_read",)),
    ("pg.blks_hit_per_s", "pg_stat_database", ("blks_hit",)),
)


def place(last: Snapshot | None, snapshot: Snapshot, resumed_on: str | None) -> None:
    """Put a new reading in `last`'s stretch, or in the next one when it was taken after an
    outage (`resumed_on`: "same" server or "other") and its counters do not continue
    `last`'s: a crash reset them, or a failover moved the sampler to another server."""
    if last is None:
        return
    snapshot.stretch = last.stretch
    if resumed_on is not None:
        went_on = resumed_on == "same" and not snapshot_delta(last, snapshot)[1]
        snapshot.stretch += 0 if went_on else 1
        snapshot.after_gap = True


def stretches(snapshots: list[Snapshot]) -> list[list[Snapshot]]:
    """The readings cut where their counters stop continuing one another (pure)."""
    out: list[list[Snapshot]] = []
    for snapshot in snapshots:
        if out and out[-1][-1].stretch == snapshot.stretch:
            out[-1].append(snapshot)
        else:
            out.append([snapshot])
    return out


def summed_delta(snapshots: list[Snapshot]) -> tuple[dict[str, JSONValue], list[str]]:
    """What changed over the step: the sum of each stretch's delta (snapshot_delta), levels
    as read last. What happened between two stretches (an outage) is not counted."""
    total: dict[str, JSONValue] = {}
    reset: list[str] = []
    for part in stretches(snapshots):
        views, went_back = snapshot_delta(part[0], part[-1])
        reset += went_back
        for name, delta in views.items():
            before = total.get(name)
            if isinstance(delta, list):
                before_rows = before if isinstance(before, list) else []
                total[name] = _add_io_rows(before_rows, delta)
            elif isinstance(delta, dict):
                total[name] = _add_row(before if isinstance(before, dict) else {}, delta)
    return total, sorted(set(reset))


def _add_row(total: dict[str, JSONValue], delta: dict[str, JSONValue]) -> dict[str, JSONValue]:
    out = dict(total)
    for name, value in delta.items():
        previous = out.get(name)
        summable = name not in NOT_COUNTERS and isinstance(previous, int | float)
        if summable and isinstance(value, int | float) and not isinstance(previous, bool):
            added = previous + value  # type: ignore[operator]
            out[name] = round(added, 3) if isinstance(added, float) else added
        else:
            out[name] = value
    return out


def _add_io_rows(total: list[JSONValue], delta: list[JSONValue]) -> list[JSONValue]:
    rows: dict[tuple[str, ...], dict[str, JSONValue]] = {}
    for row in [*total, *delta]:
        if isinstance(row, dict):
            key = tuple(str(row.get(k)) for k in IO_KEY)
            rows[key] = _add_row(rows.get(key, {}), row)
    return list(rows.values())


def snapshot_series(snapshots: list[Snapshot]) -> dict[str, list[Sample]]:
    """Per-interval rates of the counters worth plotting, and of WAL generated (exact,
    from the insert position rather than from the statistics, which lag by up to a second).
    No rate over an outage or across stretches: the series have a gap there."""
    series: dict[str, list[Sample]] = {}
    for a, b in itertools.pairwise(snapshots):
        seconds = b.t - a.t
        if seconds <= 0 or b.after_gap or a.stretch != b.stretch:
            continue
        t = round(b.t, 3)
        if a.wal_lsn_bytes is not None and b.wal_lsn_bytes is not None:
            rate = max(0, b.wal_lsn_bytes - a.wal_lsn_bytes) / seconds
            series.setdefault("pg.wal_bytes_per_s", []).append(Sample(t, rate))
        for name, view, columns in SERIES:
            before, after = a.views.get(view, {}), b.views.get(view, {})
            column = next((c for c in columns if c in before and c in after), None)
            if column is not None:
                value = max(0.0, float(after[column] - before[column])) / seconds
                series.setdefault(name, []).append(Sample(t, value))
    return series


class PgStatsSampler(PeriodicSampler):
    name = "pgstats"

    def __init__(self) -> None:
        super().__init__()
        self.own = OwnConnection("howfast-sampler", "5s")
        self.db: psycopg.Connection[tuple[object, ...]] | None = None
        self.query = ""
        self.version_num = 0
        self.settings: dict[str, str] = {}
        self.sessions_before = 0
        self.skipped: dict[str, str] = {}
        self.snapshots: list[Snapshot] = []
        self.server: Connection | None = None  # the one read now
        self.resumed_on: str | None = None  # after an outage: "same" or "other" server

    def begin(self, ctx: SamplerContext) -> None:
        self._connect(ctx)
        assert self.db is not None
        row = self.db.execute("SELECT current_setting('server_version_num')::int").fetchone()
        self.version_num = int(str(row[0])) if row else 0
        rows = self.db.execute(
            "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)",
            (list(STEP_SETTINGS),),
        ).fetchall()
        self.settings = {str(name): str(value) for name, value in rows}
        views, self.skipped = choose_views(self.version_num)
        present = self._present([v.name for v in views])
        for view in views:
            if view.name not in present:
                self.skipped[view.name] = "not found on this server"
        self.query = build_query([v for v in views if v.name in present])
        self.sessions_before = self._other_sessions()
        self.tick(ctx.now())

    def _connect(self, ctx: SamplerContext) -> None:
        self.db = self.own.open(ctx.current_connection(), ctx.own_connections)
        self.server = self.own.server

    def resume(self, ctx: SamplerContext) -> bool:
        """After an event cut the connection: a new one to the current primary. The next
        reading continues the counters when they went on (a clean restart keeps them), else
        starts a new stretch (a crash reset them; a failover is another server)."""
        before = self.server
        self._connect(ctx)
        self.resumed_on = "same" if self.server == before else "other"
        return True

    def _present(self, names: list[str]) -> set[str]:
        assert self.db is not None
        rows = self.db.execute(
            "SELECT n FROM unnest(%s::text[]) n WHERE to_regclass('pg_catalog.' || n) IS NOT NULL",
            (names,),
        ).fetchall()
        return {str(r[0]) for r in rows}

    def _other_sessions(self) -> int:
        """The client sessions other than howfast's own (its samplers connect while the step
        starts, after this count's first reading: counted, they made every step wait the
        whole SETTLE_S for sessions that never end)."""
        assert self.db is not None
        row = self.db.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() "
            "AND coalesce(application_name, '') NOT LIKE 'howfast%'"
        ).fetchone()
        return int(str(row[0])) if row else 0

    def _transactions(self) -> int:
        assert self.db is not None
        row = self.db.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database "
            "WHERE datname = current_database()"
        ).fetchone()
        return int(str(row[0])) if row else 0

    def settle(self) -> None:
        """A session reports its last statistics as it exits, a moment after its client
        (pgbench) has gone: wait, up to a second, for the step's sessions to end, then until
        the database's transaction count holds still for SETTLE_QUIET_S (their last figures
        are in), up to SETTLE_S more."""
        deadline = time.monotonic() + SETTLE_S
        while self._other_sessions() > self.sessions_before and time.monotonic() < deadline:
            time.sleep(0.01)
        deadline = time.monotonic() + SETTLE_S
        last = self._transactions()
        while time.monotonic() < deadline:
            time.sleep(SETTLE_QUIET_S)
            now = self._transactions()
            if now == last:
                break
            last = now

    def tick(self, t: float) -> None:
        assert self.db is not None
        row = self.db.execute(self.query).fetchone()
        if not row or not isinstance(row[0], dict):
            return
        snapshot = parse_snapshot(t, row[0])
        place(self.snapshots[-1] if self.snapshots else None, snapshot, self.resumed_on)
        self.resumed_on = None
        self.snapshots.append(snapshot)

    def stop(self) -> SamplerResult:
        out = super().stop()
        self.own.release(self.finished)
        self.db = None
        return out

    def result(self) -> SamplerResult:
        out = SamplerResult()
        section: dict[str, JSONValue] = {
            "server_version_num": self.version_num or None,
            "settings": dict(self.settings),
            "skipped_views": dict(self.skipped),
            "stats_sampling": {
                "missed_readings": self.missed_readings,
                "reconnects": self.reconnects,
                "stretches": len(stretches(self.snapshots)),
            },
        }
        if len(self.snapshots) >= 2:
            first, last = self.snapshots[0], self.snapshots[-1]
            views, reset = summed_delta(self.snapshots)
            section["seconds"] = round(last.t - first.t, 3)
            section["views"] = views
            wal = [
                p[-1].wal_lsn_bytes - p[0].wal_lsn_bytes
                for p in stretches(self.snapshots)
                if p[-1].wal_lsn_bytes is not None and p[0].wal_lsn_bytes is not None
            ]
            if wal:
                section["wal_bytes"] = max(0, sum(wal))
            out.series.update(snapshot_series(self.snapshots))
            out.warnings += [
                f"statistics of {name} were reset during the step: its deltas are incomplete"
                for name in reset
            ]
            out.warnings += _gap_warnings(self.snapshots)
        out.sections["postgres"] = section
        return out


def _gap_warnings(snapshots: list[Snapshot]) -> list[str]:
    """What the statistics' totals miss: the outages between stretches."""
    out = []
    for a, b in itertools.pairwise(snapshots):
        if a.stretch != b.stretch:
            out.append(
                f"PostgreSQL's statistics between {a.t:.1f} s and {b.t:.1f} s are not counted: "
                "an event reset them or moved to another server (a crash, a failover)"
            )
    return out


def _create(setup: SamplerSetup) -> PgStatsSampler | None:
    return PgStatsSampler() if setup.connection is not None else None


# Every sampled step on a target with a server (samplers/registry.py).
SAMPLER = SamplerPlugin("pgstats", _create, order=30, sections=("postgres",))
