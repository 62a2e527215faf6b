"""Replication figures of a step whose workload declares `design_figures` (pgbench's),
derived when a run is read (docs/replication.md).

From what the replication sampler stored (`postgres.replication`, series
`replication.<standby>.<lag>_ms`) and the wait profile (`postgres.wait_sampling`):

- `replication_{write,flush,replay}_lag_p50_ms` / `_p99_ms`: nearest-rank percentiles of the
  worst standby's per-second lags (worst: the highest p50 of that lag);
- `replication_sent_bytes`, `replication_replayed_bytes`: WAL sent to and replayed by the
  standbys during the step, summed over them;
- `wait_syncrep_share`: the share of active-session samples waiting for a synchronous standby
  (`IPC:SyncRep`);
- `commit_syncrep_wait_ms`: that share of a transaction's active time, in milliseconds;
- the commit time split, an estimate: `commit_local_flush_ms` (the local commit path's share
  of the active time per transaction), `commit_replication_rtt_ms` (the write lag p50: the hop
  and the standby's write), `commit_standby_flush_ms` (flush lag p50 - write lag p50) and
  `commit_standby_apply_ms` (replay - flush), each for the levels that wait for it;
- `standby_write_bytes`: what the standbys wrote (each by its device when the device is its
  own, else by its I/O cgroup or its processes' /proc/PID/io: analysis/design_writes.py), and
  `design_write_bytes`, `design_write_bytes_per_tx`: the primary's own writes
  (`pg_write_bytes`) plus those, over the step's transactions: the design's bytes written per
  transaction on all its volumes.

Pure functions of a stored step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from howfast.analysis.design_writes import design_writes
from howfast.model import JSONValue, RunRecord, Sample, StepRecord
from howfast.plugin.registry import find

LAGS = ("write", "flush", "replay")
# The commit split's parts, in the order a commit meets them: (short name, metric)
SPLIT_PARTS = (
    ("local flush", "commit_local_flush_ms"),
    ("hop + standby write", "commit_replication_rtt_ms"),
    ("standby flush", "commit_standby_flush_ms"),
    ("standby replay", "commit_standby_apply_ms"),
)
SYNCREP = "IPC:SyncRep"
# The local commit path (why.py's COMMIT_EVENTS without SyncRep): writing and flushing WAL
LOCAL_COMMIT = frozenset(
    {"IO:WALSync", "IO:WALWrite", "IO:WALInitSync", "IO:WALInitWrite", "LWLock:WALWrite",
     "LWLock:WALWriteLock"}
)  # fmt: skip
# What a commit waits for on the standby at each level, in order
WAITS_FOR = {"remote_write": ("write",), "on": ("write", "flush"),
             "remote_apply": ("write", "flush", "replay")}  # fmt: skip


def nearest_rank(values: Sequence[float], p: float) -> float | None:
    """The nearest-rank percentile (p in 0..100) of `values`; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def replication_section(sections: Mapping[str, Any]) -> Mapping[str, Any] | None:
    postgres = sections.get("postgres")
    found = postgres.get("replication") if isinstance(postgres, Mapping) else None
    return found if isinstance(found, Mapping) else None


def standby_names(sections: Mapping[str, Any]) -> list[str]:
    found = replication_section(sections)
    standbys = found.get("standbys") if found else None
    return sorted(standbys) if isinstance(standbys, Mapping) else []


def series_names(sections: Mapping[str, Any]) -> set[str]:
    """The series the derivation reads (a run read without its series loads only these)."""
    return {f"replication.{n}.{lag}_lag_ms" for n in standby_names(sections) for lag in LAGS}


def lag_metrics(
    series: Mapping[str, Sequence[Sample]], names: Sequence[str]
) -> dict[str, JSONValue]:
    """p50 and p99 of each lag, from the standby whose p50 of it is the highest."""
    out: dict[str, JSONValue] = {}
    for lag in LAGS:
        worst: tuple[float, float] | None = None
        for name in names:
            values = [s.value for s in series.get(f"replication.{name}.{lag}_lag_ms", [])]
            p50, p99 = nearest_rank(values, 50), nearest_rank(values, 99)
            if p50 is not None and p99 is not None and (worst is None or p50 > worst[0]):
                worst = (p50, p99)
        if worst is not None:
            out[f"replication_{lag}_lag_p50_ms"] = round(worst[0], 3)
            out[f"replication_{lag}_lag_p99_ms"] = round(worst[1], 3)
    return out


def syncrep_share(sections: Mapping[str, Any]) -> float | None:
    """IPC:SyncRep samples over active-session samples; None without a wait profile."""
    postgres = sections.get("postgres")
    sampling = postgres.get("wait_sampling") if isinstance(postgres, Mapping) else None
    if not isinstance(sampling, Mapping):
        return None
    counts = sampling.get("counts")
    if not isinstance(counts, Mapping):
        return None
    active = sum(v for v in counts.values() if isinstance(v, int | float))
    if not active:
        return None
    waiting = counts.get(SYNCREP, 0)
    return float(waiting) / active if isinstance(waiting, int | float) else None


def active_ms_per_transaction(step: StepRecord, share_idle: float | None) -> float | None:
    """clients x (1 - idle share) / tps, in ms: the time a session is active per transaction."""
    clients, tps = step.all_params.get("clients"), step.metrics.get("tps")
    if not isinstance(clients, int) or not isinstance(tps, int | float) or tps <= 0:
        return None
    return clients * (1 - (share_idle or 0.0)) / float(tps) * 1000


def share_of(sections: Mapping[str, Any], keys: frozenset[str]) -> float | None:
    postgres = sections.get("postgres")
    sampling = postgres.get("wait_sampling") if isinstance(postgres, Mapping) else None
    counts = sampling.get("counts") if isinstance(sampling, Mapping) else None
    if not isinstance(counts, Mapping):
        return None
    active = sum(v for v in counts.values() if isinstance(v, int | float))
    waiting = sum(v for k, v in counts.items() if k in keys and isinstance(v, int | float))
    return waiting / active if active else None


def commit_split(
    step: StepRecord, lags: Mapping[str, JSONValue], active_ms: float | None, level: str | None
) -> dict[str, JSONValue]:
    """A commit's time in parts (an estimate: lags are read once a second). The walsender
    sends WAL once it is flushed locally, and PostgreSQL times each position from that flush
    to the standby's write, flush and replay: so a commit is about the local flush plus the
    lag of the level it waits for."""
    out: dict[str, JSONValue] = {}
    local = share_of(step.sections, LOCAL_COMMIT)
    if local is not None and active_ms is not None:
        out["commit_local_flush_ms"] = round(local * active_ms, 3)
    p50 = {lag: lags.get(f"replication_{lag}_lag_p50_ms") for lag in LAGS}
    waited = WAITS_FOR.get(level or "", ())
    previous = 0.0
    names = {"write": "commit_replication_rtt_ms", "flush": "commit_standby_flush_ms",
             "replay": "commit_standby_apply_ms"}  # fmt: skip
    for lag in waited:
        value = p50.get(lag)
        if not isinstance(value, int | float):
            break
        out[names[lag]] = round(max(0.0, float(value) - previous), 3)
        previous = float(value)
    return out


def replication_metrics(
    step: StepRecord, idle_share: float | None, level: str | None = None
) -> dict[str, JSONValue]:
    """Every figure of this module for one step; {} when it had no replication section and no
    SyncRep wait (a server without synchronous standbys)."""
    found = replication_section(step.sections)
    share = syncrep_share(step.sections)
    if found is None and not share:
        return {}
    out: dict[str, JSONValue] = {}
    if found is not None:
        names = standby_names(step.sections)
        out.update(lag_metrics(step.series, names))
        standbys = found.get("standbys")
        if isinstance(standbys, Mapping):
            for key in ("sent_bytes", "replayed_bytes"):
                values = [v.get(key) for v in standbys.values() if isinstance(v, Mapping)]
                numbers = [int(v) for v in values if isinstance(v, int | float)]
                if numbers:
                    out[f"replication_{key}"] = sum(numbers)
    out.update(design_writes(step).metrics)
    active = active_ms_per_transaction(step, idle_share)
    if share is not None:
        out["wait_syncrep_share"] = round(share, 4)
        if active is not None:
            out["commit_syncrep_wait_ms"] = round(share * active, 3)
    out.update(commit_split(step, out, active, level))
    return out


def sync_level(settings: Mapping[str, Any]) -> str | None:
    """The lag a commit waits for at this synchronous_commit level (with synchronous
    standbys): 'write', 'flush', 'replay', or None when commits do not wait for standbys."""
    if not str(settings.get("synchronous_standby_names") or "").strip():
        return None
    level = str(settings.get("synchronous_commit") or "on")
    return {"remote_write": "write", "on": "flush", "remote_apply": "replay"}.get(level)


# -- the designs side by side (the `replication` plan's table) ---------------------------------


@dataclass(frozen=True)
class DesignRow:
    """One target of a run as a design: its standbys, load time, and the figures of its
    `design_figures` steps (pgbench's) by client count (means over repetitions; the first
    mode of the run)."""

    target: str
    design: str  # "no standby", "1 sync standby (on)", "2 async standbys"
    standbys: int
    load_s: float | None
    mode: str | None
    tps: dict[int, float]  # clients -> mean TPS
    p99_ms: dict[int, float]
    # At the fewest clients: where a synchronous standby costs most
    syncrep_share: float | None
    sync_lag_p50_ms: float | None
    commit_syncrep_wait_ms: float | None
    write_bytes_per_tx: float | None  # primary and standbys, their own writes
    # The commit split at the fewest clients: part name -> ms (an estimate)
    commit_split: dict[str, float] = field(default_factory=dict)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _design(steps: Sequence[StepRecord], settings: Mapping[str, str]) -> tuple[str, int]:
    standbys: Mapping[str, Any] = {}
    for step in steps:
        found = replication_section(step.sections)
        if found is not None and isinstance(found.get("standbys"), Mapping):
            standbys = found["standbys"]
            break
    count = len(standbys)
    if count == 0:
        return "no standby", 0
    plural = "s" if count > 1 else ""
    states = {str(s.get("sync_state")) for s in standbys.values() if isinstance(s, Mapping)}
    if states <= {"async", "None", ""}:
        return f"{count} async standby{plural}", count
    level = str(settings.get("synchronous_commit") or "on")
    return f"{count} sync standby{plural} ({level})", count


def _design_figures(step: StepRecord) -> bool:
    plugin = find(step.workload)
    return plugin is not None and plugin.design_figures


def _last_load_time(steps: Sequence[StepRecord]) -> JSONValue:
    """The time the last step that loaded the data took (its workload's `load_metric`)."""
    for step in reversed(steps):
        plugin = find(step.workload)
        if plugin is not None and plugin.loads_data:
            return step.metrics.get(plugin.load_metric) if plugin.load_metric else None
    return None


def design_rows(run: RunRecord) -> list[DesignRow]:
    """A row per target of a derived run, in the order the targets ran."""
    rows = []
    for target in run.targets:
        steps = [s for s in run.steps if s.target == target.name and s.status == "completed"]
        measured = [s for s in steps if _design_figures(s) and not s.all_params.get("warmup")]
        mode = next((str(s.all_params.get("mode")) for s in measured), None)
        measured = [s for s in measured if str(s.all_params.get("mode")) == mode]
        by_clients: dict[int, list[StepRecord]] = {}
        # A step with events is not the design's figure: an outage is in its TPS, and after a
        # failover it ran on the promoted standby, without the design's standbys.
        for step in (s for s in measured if not s.all_params.get("events")):
            clients = step.all_params.get("clients")
            if isinstance(clients, int):
                by_clients.setdefault(clients, []).append(step)

        def mean_of(name: str, group: Sequence[StepRecord]) -> float | None:
            values = [s.metrics.get(name) for s in group]
            return _mean([float(v) for v in values if isinstance(v, int | float)])

        tps = {c: v for c, g in sorted(by_clients.items()) if (v := mean_of("tps", g)) is not None}
        p99 = {
            c: v
            for c, g in sorted(by_clients.items())
            if (v := mean_of("latency_p99_ms", g)) is not None
        }
        fewest = by_clients[min(by_clients)] if by_clients else []
        lag = sync_level(target.settings) or "flush"
        load = _last_load_time(steps)
        design, count = _design(measured, target.settings)
        rows.append(
            DesignRow(
                target=target.name,
                design=design,
                standbys=count,
                load_s=float(load) if isinstance(load, int | float) else None,
                mode=mode,
                tps=tps,
                p99_ms=p99,
                syncrep_share=mean_of("wait_syncrep_share", fewest),
                sync_lag_p50_ms=mean_of(f"replication_{lag}_lag_p50_ms", fewest),
                commit_syncrep_wait_ms=mean_of("commit_syncrep_wait_ms", fewest),
                write_bytes_per_tx=mean_of("design_write_bytes_per_tx", fewest),
                commit_split={
                    part: v
                    for part, name in SPLIT_PARTS
                    if (v := mean_of(name, fewest)) is not None
                },
            )
        )
    return rows


def shows_designs(run: RunRecord, rows: Sequence[DesignRow]) -> bool:
    """The table is shown for the `replication` plan, or when a target had standbys."""
    return bool(rows) and (run.plan == "replication" or any(r.standbys for r in rows))


def design_document(row: DesignRow) -> dict[str, JSONValue]:
    """A row as JSON (`compare --json`'s `designs`); client counts as keys are strings."""
    return {
        "target": row.target,
        "design": row.design,
        "standbys": row.standbys,
        "load_s": row.load_s,
        "mode": row.mode,
        "tps": {str(c): round(v, 3) for c, v in row.tps.items()},
        "latency_p99_ms": {str(c): round(v, 3) for c, v in row.p99_ms.items()},
        "wait_syncrep_share": row.syncrep_share,
        "sync_lag_p50_ms": row.sync_lag_p50_ms,
        "commit_syncrep_wait_ms": row.commit_syncrep_wait_ms,
        "design_write_bytes_per_tx": row.write_bytes_per_tx,
        "commit_split_ms": {part: round(v, 3) for part, v in row.commit_split.items()},
    }
