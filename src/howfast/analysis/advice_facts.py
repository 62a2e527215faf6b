"""The facts the advice rules read (analysis/advice.py), gathered from a derived run: a
target's settings and durability, pg_test_fsync's times per method, and per step the commit
waits, the checkpoints WAL volume started and the TPS around checkpoints. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import Any

from howfast.analysis.advice import (
    AdviceFacts,
    CommitWait,
    Dip,
    WalCheckpoints,
    seconds,
    size_mb,
)
from howfast.analysis.durability import Durability, least_flush_ms
from howfast.analysis.durability_facts import target_media, target_platform
from howfast.analysis.hooks import evidence_of, verdict_label
from howfast.analysis.io import checkpoint_windows
from howfast.model import JSONValue, StepRecord, TargetRecord
from howfast.plugin.registry import find
from howfast.walsync import WAL_SYNC_METHODS


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _measured(step: StepRecord) -> bool:
    """A completed step whose client sessions did the work (pgbench's: `drives_sessions`),
    not a warm-up: its commit waits, checkpoints and TPS dips say what to tune."""
    plugin = find(step.workload)
    return (
        plugin is not None
        and plugin.drives_sessions
        and step.status == "completed"
        and step.all_params.get("warmup") is not True
    )


def _in_force(step: StepRecord, settings: Mapping[str, str]) -> dict[str, str]:
    """The target's settings with the step's own: what the sampler read, else what the step
    asked (and had applied)."""
    out = dict(settings)
    sampled = _map(_map(step.sections.get("postgres")).get("settings"))
    params = step.all_params
    asked = _map(params.get("settings")) if params.get("settings_applied") is not False else {}
    out.update({str(k): str(v) for k, v in asked.items()})
    out.update({str(k): str(v) for k, v in sampled.items()})
    return out


def _step_seconds(step: StepRecord) -> float | None:
    duration = _num(step.all_params.get("duration_s"))
    return duration if duration else _num(_map(step.sections.get("io")).get("sampled_s"))


def _wal_checkpoints(step: StepRecord, settings: Mapping[str, str]) -> WalCheckpoints | None:
    events = _map(step.sections.get("postgres")).get("checkpoints")
    started = [
        e
        for e in (events if isinstance(events, list) else [])
        if isinstance(e, Mapping)
        and e.get("reason") == "wal"
        and (_num(e.get("start_t")) is None or (_num(e.get("start_t")) or 0.0) >= 0)
    ]
    wal = _num(step.metrics.get("wal_bytes"))
    length = _step_seconds(step)
    if not started or not wal or not length:
        return None
    ran = _in_force(step, settings)
    return WalCheckpoints(
        label=verdict_label(step),
        by_wal=len(started),
        wal_bytes=int(wal),
        seconds=length,
        checkpoint_timeout_s=seconds(ran.get("checkpoint_timeout")),
        completion_target=_float(ran.get("checkpoint_completion_target")),
        max_wal_size_mb=size_mb(ran.get("max_wal_size")),
    )


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _dip(step: StepRecord, settings: Mapping[str, str]) -> Dip | None:
    during = _num(step.metrics.get("tps_during_checkpoints"))
    outside = _num(step.metrics.get("tps_outside_checkpoints"))
    events = _map(step.sections.get("postgres")).get("checkpoints")
    length = _step_seconds(step)
    if during is None or outside is None or not isinstance(events, list) or not length:
        return None
    windows = checkpoint_windows([e for e in events if isinstance(e, Mapping)], length)
    inside = sum(
        1
        for p in step.series.get("tps", [])
        if any(p.t - 1.0 < end and p.t > start for start, end in windows)
    )
    total = len(step.series.get("tps", []))
    return Dip(
        label=verdict_label(step),
        during=during,
        outside=outside,
        seconds_during=inside,
        seconds_outside=total - inside,
        completion_target=_float(_in_force(step, settings).get("checkpoint_completion_target")),
    )


def target_advice_facts(
    target: TargetRecord,
    steps: Sequence[StepRecord],
    environment: Mapping[str, JSONValue],
    durability: Durability,
) -> AdviceFacts:
    settings = dict(target.settings)
    media, _ = target_media(target)
    data = next((m for m in media if m.role == "data"), None)
    facts = AdviceFacts(
        target=target.name,
        kind=target.kind,
        settings=settings,
        platform=target_platform(target, environment),
        durability=durability.verdict,
        durability_rule=durability.rule,
        least_flush_ms=least_flush_ms(data) if data is not None else None,
    )
    done = [s for s in steps if s.status == "completed"]
    for step in done:  # each run of a probe of the sync methods (pg_test_fsync)
        evidence = evidence_of(step)
        if evidence is not None and evidence.sync_method_us:
            facts.method_runs.append(dict(evidence.sync_method_us))
    for method in WAL_SYNC_METHODS:
        times = [r[method] for r in facts.method_runs if method in r]
        if times:
            facts.methods_us[method] = fmean(times)
    # The flush of the probe made for it (fio's wal-fsync profile), as durability averaged it
    preferred = {
        e.flush_source
        for s in done
        if (e := evidence_of(s)) and e.preferred_flush and e.flush_source
    }
    flushes = _map(durability.evidence).get("flushes")
    for flush in flushes if isinstance(flushes, list) else []:
        if isinstance(flush, Mapping) and flush.get("source") in preferred:
            facts.fio_flush_ms = _num(flush.get("ms"))
    for step in done:
        if not _measured(step):
            continue
        ran = _in_force(step, settings)
        share, clients = _num(step.metrics.get("wait_commit_share")), step.all_params.get("clients")
        if share is not None and isinstance(clients, int):
            flushes_on = all(
                ran.get(n, "on").lower() not in ("off", "false", "0")
                for n in ("fsync", "synchronous_commit")
            )
            facts.commit_waits.append(CommitWait(verdict_label(step), clients, share, flushes_on))
        found = _wal_checkpoints(step, settings)
        if found is not None:
            facts.wal_checkpoints.append(found)
        dip = _dip(step, settings)
        if dip is not None:
            facts.dips.append(dip)
    return facts
