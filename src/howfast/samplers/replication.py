"""Replication to the standbys, sampled once a second on the primary (issue 28).

Source: `pg_stat_replication` (targets/replicas/builders.STATE_QUERY), on a connection of its
own (`application_name` `howfast-replication`), the statement prepared once and executed
through libpq as the wait-event sampler does. What is stored is raw:

- series per standby: `replication.<name>.write_lag_ms`, `.flush_lag_ms`, `.replay_lag_ms`
  (only the seconds where PostgreSQL gave a value: NULL is no measurement, never 0),
  `.sent_bytes_per_s`, `.unreplayed_bytes` (sent, not yet replayed);
- section `postgres.replication`: per standby its state and sync state as last seen, the
  WAL bytes sent and replayed during the step, how many lag readings and NULLs;
- warnings: a standby not streaming at some reading, a slot whose WAL was removed.

Percentiles, the SyncRep share and the verdict are derived when the run is read
(analysis/replication.py, analysis/why.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg

from howfast.model import JSONValue, Sample
from howfast.plugin.workload import WorkloadPlugin
from howfast.samplers.base import PeriodicSampler, SamplerContext, SamplerResult
from howfast.samplers.own_connection import OwnConnection
from howfast.samplers.plugin import SamplerPlugin, SamplerSetup
from howfast.samplers.prepared import prepare, text_rows
from howfast.targets.capabilities import HasStandbys
from howfast.targets.replicas.builders import SLOTS_QUERY, STATE_QUERY
from howfast.targets.replicas.state import StandbyState, parse_state

APPLICATION = "howfast-replication"
STATEMENT = b"howfast_replication"
LAGS = ("write_lag_ms", "flush_lag_ms", "replay_lag_ms")


@dataclass
class Seen:
    """One standby over the step."""

    first_sent: int | None = None
    first_replay: int | None = None
    last: StandbyState | None = None
    previous_sent: tuple[float, int] | None = None  # (t, sent_lsn)
    not_streaming: dict[str, int] = field(default_factory=dict)  # state -> readings
    lag_readings: int = 0
    lag_nulls: int = 0
    series: dict[str, list[Sample]] = field(default_factory=dict)


def fold(
    seen: dict[str, Seen], t: float, states: dict[str, StandbyState], *, lags: bool = True
) -> None:
    """One reading into what was seen so far (pure). `lags=False`: the reading before the
    load, for the WAL positions only (its lags are the last ones measured, maybe long ago)."""
    for name, state in states.items():
        one = seen.setdefault(name, Seen())
        if one.first_sent is None:
            one.first_sent = state.sent_lsn
        if one.first_replay is None:
            one.first_replay = state.replay_lsn
        one.last = state
        if lags and state.state != "streaming":
            one.not_streaming[state.state or "unknown"] = (
                one.not_streaming.get(state.state or "unknown", 0) + 1
            )
        for lag in LAGS if lags else ():
            value = getattr(state, lag)
            one.lag_readings += 1
            if value is None:
                one.lag_nulls += 1
                continue
            one.series.setdefault(f"replication.{name}.{lag}", []).append(Sample(t, value))
        if state.sent_lsn is not None:
            if one.previous_sent is not None and t > one.previous_sent[0]:
                rate = (state.sent_lsn - one.previous_sent[1]) / (t - one.previous_sent[0])
                one.series.setdefault(f"replication.{name}.sent_bytes_per_s", []).append(
                    Sample(t, max(0.0, rate))
                )
            one.previous_sent = (t, state.sent_lsn)
            if state.replay_lsn is not None:
                one.series.setdefault(f"replication.{name}.unreplayed_bytes", []).append(
                    Sample(t, float(max(0, state.sent_lsn - state.replay_lsn)))
                )


def summarise(
    seen: dict[str, Seen], readings: int, lost_slots: list[str]
) -> tuple[dict[str, JSONValue], list[str]]:
    """The `postgres.replication` section and the warnings (pure)."""
    standbys: dict[str, JSONValue] = {}
    warnings = []
    for name, one in sorted(seen.items()):
        last = one.last
        assert last is not None
        sent = (
            last.sent_lsn - one.first_sent
            if last.sent_lsn is not None and one.first_sent is not None
            else None
        )
        replayed = (
            last.replay_lsn - one.first_replay
            if last.replay_lsn is not None and one.first_replay is not None
            else None
        )
        standbys[name] = {
            "state": last.state,
            "sync_state": last.sync_state,
            "sync_priority": last.sync_priority,
            "sent_bytes": sent,
            "replayed_bytes": replayed,
            "lag_readings": one.lag_readings,
            "lag_nulls": one.lag_nulls,
        }
        for state, n in sorted(one.not_streaming.items()):
            warnings.append(f'{name} was "{state}" for {n} of {readings} readings (not streaming)')
    warnings += [
        f"the replication slot {slot} lost WAL its standby still needed "
        "(max_slot_wal_keep_size): the standby cannot catch up"
        for slot in lost_slots
    ]
    section: dict[str, JSONValue] = {
        "source": "pg_stat_replication",
        "interval_s": 1,
        "readings": readings,
        "standbys": standbys,
    }
    return section, warnings


class ReplicationSampler(PeriodicSampler):
    name = "replication"

    def __init__(self) -> None:
        super().__init__()
        self.own = OwnConnection(APPLICATION, "2s")
        self.db: psycopg.Connection[tuple[object, ...]] | None = None
        self.seen: dict[str, Seen] = {}
        self.readings = 0
        self.lost_slots: list[str] = []

    def begin(self, ctx: SamplerContext) -> None:
        self._connect(ctx)
        self._read(0.0, lags=False)  # where the WAL positions start

    def resume(self, ctx: SamplerContext) -> bool:
        """After an event cut the connection: a new one to the current primary (after a
        failover, the promoted standby: its own standbys, if any, are read from then on).
        The send rate starts again: a rate over the outage would be no reading."""
        self._connect(ctx)
        for one in self.seen.values():
            one.previous_sent = None
        return True

    def _connect(self, ctx: SamplerContext) -> None:
        self.db = self.own.open(ctx.current_connection(), ctx.own_connections)
        prepare(self.db.pgconn, STATEMENT, STATE_QUERY)

    def tick(self, t: float) -> None:
        self._read(t)

    def _read(self, t: float, *, lags: bool = True) -> None:
        assert self.db is not None
        rows = text_rows(self.db.pgconn, STATEMENT)
        self.readings += 1 if lags else 0
        fold(self.seen, t, parse_state(rows), lags=lags)

    def settle(self) -> None:
        assert self.db is not None
        rows = self.db.execute(SLOTS_QUERY).fetchall()
        self.lost_slots = [str(name) for name, status in rows if status == "lost"]

    def stop(self) -> SamplerResult:
        out = super().stop()
        self.own.release(self.finished)
        self.db = None
        return out

    def result(self) -> SamplerResult:
        out = SamplerResult()
        if not self.seen:
            out.warnings.append("no standby was connected to the primary during the step")
        section, warnings = summarise(self.seen, self.readings, self.lost_slots)
        section["missed_readings"] = self.missed_readings
        section["reconnects"] = self.reconnects
        out.sections["postgres"] = {"replication": section}
        out.warnings += warnings
        for one in self.seen.values():
            out.series.update(one.series)
        return out


def _create(setup: SamplerSetup) -> ReplicationSampler | None:
    target = setup.target
    if setup.connection is None or not isinstance(target, HasStandbys):
        return None
    return ReplicationSampler() if target.standbys() else None


def _watches(workload: WorkloadPlugin[Any]) -> bool:
    """Steps whose sessions make WAL to replicate (pgbench), as the wait-event sampler's."""
    return workload.sampled and workload.drives_sessions


# Those steps, on a primary howfast gave standbys (samplers/registry.py).
SAMPLER = SamplerPlugin("replication", _create, watches=_watches, order=36, sections=("postgres",))
