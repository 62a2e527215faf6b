"""What pg_stat_replication says of each standby, parsed (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from howfast.targets.replicas.builders import STATE_COLUMNS


@dataclass(frozen=True)
class StandbyState:
    name: str
    state: str  # startup, catchup, streaming, backup, stopping
    sync_state: str  # async, potential, sync, quorum
    sync_priority: int
    sent_lsn: int | None
    write_lsn: int | None
    flush_lsn: int | None
    replay_lsn: int | None
    write_lag_ms: float | None
    flush_lag_ms: float | None
    replay_lag_ms: float | None
    current_lsn: int  # the primary's, when the row was read


def _int(value: object) -> int | None:
    if value is None:
        return None
    return int(str(value).split(".")[0])


def _float(value: object) -> float | None:
    if value is None:
        return None
    number = float(str(value))
    return number if math.isfinite(number) else None


def parse_state(rows: Sequence[Sequence[object]]) -> dict[str, StandbyState]:
    """STATE_QUERY's rows (values as libpq's text or Python numbers) by application_name."""
    out = {}
    for row in rows:
        if len(row) != len(STATE_COLUMNS):
            raise ValueError(f"a pg_stat_replication row of {len(row)} columns")
        name = str(row[0] or "")
        out[name] = StandbyState(
            name=name,
            state=str(row[1] or ""),
            sync_state=str(row[2] or ""),
            sync_priority=_int(row[3]) or 0,
            sent_lsn=_int(row[4]),
            write_lsn=_int(row[5]),
            flush_lsn=_int(row[6]),
            replay_lsn=_int(row[7]),
            write_lag_ms=_float(row[8]),
            flush_lag_ms=_float(row[9]),
            replay_lag_ms=_float(row[10]),
            current_lsn=_int(row[11]) or 0,
        )
    return out


def caught_up(state: StandbyState, target_lsn: int) -> bool:
    """Streaming, and everything up to `target_lsn` replayed."""
    return (
        state.state == "streaming"
        and state.replay_lsn is not None
        and state.replay_lsn >= target_lsn
    )


def describe_state(name: str, states: dict[str, StandbyState]) -> str:
    """'not connected' or 'catchup, replayed 12 kB behind'"""
    found = states.get(name)
    if found is None:
        return "not connected"
    behind = ""
    if found.replay_lsn is not None:
        behind = f", replay {found.current_lsn - found.replay_lsn} bytes behind"
    return f"{found.state or 'unknown'} ({found.sync_state or 'no sync state'}){behind}"
