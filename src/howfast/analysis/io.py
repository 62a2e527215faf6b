"""What the samples of one step say: per-role I/O figures, burstiness, access pattern, write
amplification, checkpoints and the TPS around them, cache hit ratio, and the warnings.

Pure: it reads the step's sections (raw counter deltas, view deltas, checkpoint events) and
series, and returns metrics, warnings and additions to the sections. Nothing here touches a
file or a clock, so a stored step can be analysed again.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from howfast.diskcounters import counters_from_delta, rates
from howfast.model import JSONValue, Sample

LOAD_GENERATOR_LIMIT_PCT = 90.0  # a pgbench thread above this share of a core is the limit
SHORT_STEP_S = 60.0  # a checkpoint inside a shorter step weighs heavily on its result
MIN_WAL_BYTES = 1 << 20  # below this, bytes written per WAL byte means nothing
SMALL_KIB, LARGE_KIB = 8.0, 128.0  # one PostgreSQL page; a large sequential request


@dataclass
class Analysis:
    metrics: dict[str, JSONValue] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    sections: dict[str, dict[str, JSONValue]] = field(default_factory=dict)


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


def burstiness(points: list[Sample]) -> tuple[float | None, float | None]:
    """(peak / mean, coefficient of variation) of per-interval rates; None when the mean is
    zero or there are fewer than two intervals."""
    values = [p.value for p in points if math.isfinite(p.value)]
    if len(values) < 2:
        return None, None
    mean = statistics.fmean(values)
    if mean <= 0:
        return None, None
    return max(values) / mean, statistics.pstdev(values) / mean


def sequential_score(avg_kib: float | None, merged_ratio: float | None) -> float | None:
    """0 (random) to 1 (sequential), from request size and merging. Requests of one page that
    the kernel could not merge score 0; 128 KiB requests or most requests merged score 1.
    Device counters carry no positions: small synchronous writes, such as WAL flushes at one
    client, score as random even though they follow each other in the file."""
    if avg_kib is None:
        return None
    size = math.log2(max(avg_kib, SMALL_KIB) / SMALL_KIB) / math.log2(LARGE_KIB / SMALL_KIB)
    return min(1.0, max(size, merged_ratio or 0.0))


def pattern(score: float | None) -> str | None:
    if score is None:
        return None
    return "sequential" if score >= 0.5 else "random" if score < 0.25 else "mixed"


def role_figures(delta: Mapping[str, int], seconds: float) -> dict[str, JSONValue]:
    """A role's figures over the whole step, from its raw counter delta."""
    zero, grown = counters_from_delta(dict(delta))
    r = rates(zero, grown, seconds)
    write_score = sequential_score(r.avg_write_kib, r.write_merged_ratio)
    read_score = sequential_score(r.avg_read_kib, r.read_merged_ratio)
    return {
        "read_iops": _round(r.read_iops, 1),
        "write_iops": _round(r.write_iops, 1),
        "read_mbps": _round(r.read_mbps),
        "write_mbps": _round(r.write_mbps),
        "read_bytes": r.read_bytes,
        "write_bytes": r.write_bytes,
        "avg_read_kib": _round(r.avg_read_kib, 1),
        "avg_write_kib": _round(r.avg_write_kib, 1),
        "read_await_ms": _round(r.read_await_ms),
        "write_await_ms": _round(r.write_await_ms),
        "read_merged_ratio": _round(r.read_merged_ratio),
        "write_merged_ratio": _round(r.write_merged_ratio),
        "queue_depth": _round(r.queue_depth),
        "util_pct": _round(r.util_pct, 1),
        "flushes_per_s": _round(r.flushes_per_s, 1),
        "read_sequential": _round(read_score, 2),
        "write_sequential": _round(write_score, 2),
        "read_pattern": pattern(read_score),
        "write_pattern": pattern(write_score),
    }


# Figures copied into the step's metrics as io_<role>_<name> (numbers only).
ROLE_METRICS = (
    "read_iops",
    "write_iops",
    "read_mbps",
    "write_mbps",
    "read_bytes",
    "write_bytes",
    "avg_read_kib",
    "avg_write_kib",
    "read_await_ms",
    "write_await_ms",
    "queue_depth",
    "util_pct",
    "write_merged_ratio",
    "write_sequential",
    "write_peak_to_mean",
    "write_cv",
)


def analyze_io(io: Mapping[str, Any], series: Mapping[str, list[Sample]], out: Analysis) -> int:
    """Per-role figures; returns the bytes written by the primary's sampled devices (-1:
    unknown). A standby's role (`standby`: issue 28) has its figures but stays out of that
    sum, which is the primary's, per byte of the primary's WAL (the design's is
    analysis/replication.py's)."""
    written = 0
    roles = io.get("roles") or {}
    primary_roles = 0
    for role, info in roles.items():
        if not isinstance(info, dict):
            continue
        standby = bool(info.get("standby"))
        primary_roles += not standby
        delta, seconds = info.get("delta"), info.get("seconds")
        if info.get("device") is None and not standby:
            written = -1  # a role on tmpfs: what it wrote is not known
        if not isinstance(delta, dict) or not seconds:
            continue
        figures = role_figures(delta, float(seconds))
        peak, cv = burstiness(list(series.get(f"io.{role}.write_mbps", [])))
        figures["write_peak_to_mean"] = _round(peak, 2)
        figures["write_cv"] = _round(cv, 2)
        out.sections.setdefault("io", {}).setdefault("roles", {})[role] = {"summary": figures}
        for name in ROLE_METRICS:
            if figures.get(name) is not None:
                out.metrics[f"io_{role}_{name}"] = figures[name]
        if written >= 0 and not standby:
            written += int(figures["write_bytes"] or 0)
    return written if primary_roles else -1


def write_amplification(device_bytes: int, wal_bytes: int | None) -> float | None:
    """Bytes the devices wrote per byte of WAL PostgreSQL generated."""
    if device_bytes < 0 or not wal_bytes or wal_bytes < MIN_WAL_BYTES:
        return None
    return device_bytes / wal_bytes


def checkpoint_windows(
    events: Sequence[Mapping[str, Any]], step_end: float
) -> list[tuple[float, float]]:
    windows = []
    for e in events:
        start = e.get("start_t")
        end = e.get("end_t")
        windows.append(
            (
                float(start) if start is not None else 0.0,
                float(end) if end is not None else step_end,
            )
        )
    return windows


def tps_split(
    tps: list[Sample], windows: list[tuple[float, float]]
) -> tuple[float | None, float | None]:
    """Mean TPS of the seconds that overlap a checkpoint, and of the others. A progress
    point at t covers the second before it."""
    during: list[float] = []
    outside: list[float] = []
    for p in tps:
        lo, hi = p.t - 1.0, p.t
        hit = any(lo < end and hi > start for start, end in windows)
        (during if hit else outside).append(p.value)
    return (
        statistics.fmean(during) if during else None,
        statistics.fmean(outside) if outside else None,
    )


def checkpoints_from_views(views: Mapping[str, Any]) -> int | None:
    """Checkpoints counted by the statistics: pg_stat_checkpointer on 17+, pg_stat_bgwriter
    before. Used when the server log is not readable (existing servers)."""
    cp = views.get("pg_stat_checkpointer")
    if isinstance(cp, dict) and "num_timed" in cp:
        return int(cp.get("num_timed", 0)) + int(cp.get("num_requested", 0))
    bg = views.get("pg_stat_bgwriter")
    if isinstance(bg, dict) and "checkpoints_timed" in bg:
        return int(bg.get("checkpoints_timed", 0)) + int(bg.get("checkpoints_req", 0))
    return None


def cache_hit_ratio(database: Mapping[str, Any] | None) -> float | None:
    """Share of block requests served by shared_buffers (pg_stat_database deltas)."""
    if not database:
        return None
    hit, read = database.get("blks_hit"), database.get("blks_read")
    if not isinstance(hit, int | float) or not isinstance(read, int | float) or hit + read <= 0:
        return None
    return hit / (hit + read)


def analyze_postgres(
    postgres: Mapping[str, Any], series: Mapping[str, list[Sample]], step_s: float, out: Analysis
) -> None:
    views = postgres.get("views") or {}
    events = [e for e in postgres.get("checkpoints") or [] if isinstance(e, dict)]
    added: dict[str, JSONValue] = {}
    wal = views.get("pg_stat_wal") or {}
    for name in ("wal_records", "wal_fpi"):
        if isinstance(wal.get(name), int | float):
            out.metrics[name] = wal[name]
    if isinstance(postgres.get("wal_bytes"), int):
        out.metrics["wal_bytes"] = postgres["wal_bytes"]
    ratio = cache_hit_ratio(views.get("pg_stat_database"))
    if ratio is not None:
        out.metrics["cache_hit_ratio"] = added["cache_hit_ratio"] = round(ratio, 5)
    if "checkpoints" in postgres:  # the server log was followed: events are exact
        count: int | None = len(events)
        added["checkpoints_source"] = "server log"
    else:
        count = checkpoints_from_views(views)
        added["checkpoints_source"] = "statistics views" if count is not None else None
    if count is not None:
        out.metrics["checkpoints"] = added["checkpoint_count"] = count
    if events:
        during, outside = tps_split(list(series.get("tps", [])), checkpoint_windows(events, step_s))
        if during is not None:
            out.metrics["tps_during_checkpoints"] = added["tps_during_checkpoints"] = round(
                during, 2
            )
        if outside is not None:
            out.metrics["tps_outside_checkpoints"] = added["tps_outside_checkpoints"] = round(
                outside, 2
            )
    if count and step_s < SHORT_STEP_S:
        reasons = sorted({str(e.get("reason")) for e in events if e.get("reason")})
        why = f" ({', '.join(reasons)})" if reasons else ""
        out.warnings.append(
            f"a checkpoint{why} ran during this {step_s:.0f} s step: its writes weigh on a "
            f"result this short; run steps of {SHORT_STEP_S:.0f} s or more to average over "
            "checkpoints"
        )
    out.sections["postgres"] = added


def analyze_cpu(cpu: Mapping[str, Any], out: Analysis) -> None:
    for share in ("user", "system", "iowait", "steal"):
        value = cpu.get(f"{share}_pct")
        if isinstance(value, int | float):
            out.metrics[f"cpu_{share}_pct"] = value
    if isinstance(cpu.get("page_cache_bytes_end"), int):
        out.metrics["page_cache_bytes"] = cpu["page_cache_bytes_end"]
    load = cpu.get("load_generator")
    if not isinstance(load, dict):
        return
    out.metrics["pgbench_cpu_pct"] = load.get("cpu_pct")
    busiest = load.get("busiest_thread_pct")
    out.metrics["pgbench_thread_cpu_max_pct"] = busiest
    if isinstance(busiest, int | float) and busiest > LOAD_GENERATOR_LIMIT_PCT:
        out.warnings.append(
            f"pgbench used {busiest:.0f}% of a CPU core (busiest of its "
            f"{load.get('threads')} thread(s); {load.get('cpu_pct', 0):.0f}% in all): the "
            "load generator, not the storage, may have set this number; give it more jobs "
            "or run it on another machine"
        )


def analyze_step(
    sections: Mapping[str, Any], series: Mapping[str, list[Sample]], step_s: float
) -> Analysis:
    """Everything above for one step. `step_s` is its length (the planned duration when
    known). The returned sections are additions, to be merged into the step's."""
    out = Analysis()
    io = sections.get("io")
    written = analyze_io(io, series, out) if isinstance(io, dict) else -1
    postgres = sections.get("postgres")
    if isinstance(postgres, dict):
        analyze_postgres(postgres, series, step_s, out)
        amplification = write_amplification(written, postgres.get("wal_bytes"))
        if amplification is not None:
            out.metrics["io_write_amplification"] = round(amplification, 3)
            out.sections.setdefault("io", {})["write_amplification"] = round(amplification, 3)
    if written >= 0:
        out.sections.setdefault("io", {})["device_write_bytes"] = written
    cpu = sections.get("cpu")
    if isinstance(cpu, dict):
        analyze_cpu(cpu, out)
    return out
