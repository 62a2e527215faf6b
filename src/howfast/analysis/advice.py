"""Advice: settings worth trying, each derived from what a run measured, with its evidence and
source (docs/why.md, "Advice"). Derived when a run is read; howfast never applies one.

The rules are pure functions of `AdviceFacts` (gathered by analysis/advice_facts.py; tests
build them directly):

- `wal_sync_method`: on a target judged durable, the fastest method pg_test_fsync measured
  among those that flush on the platform, at a speed the medium allows, when the one in use
  takes 20% longer or more;
- `commit_delay` (and `commit_siblings`): when several clients waited on WAL flushes, half
  the time pg_test_fsync measured for one flush (PostgreSQL's docs, "WAL Configuration");
- `max_wal_size`: when checkpoints were started by WAL volume during a step, the size that
  lets checkpoint_timeout start them instead, at the WAL rate measured;
- `checkpoint_completion_target`: when TPS dipped during checkpoints and it was below 0.9.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from howfast.analysis.durability import FLUSHING_METHODS, PLATFORM_NAMES
from howfast.model import JSONValue, RunRecord

WAL_DOCS = "PostgreSQL documentation: WAL Configuration (Reliability and the Write-Ahead Log)"
SETTINGS_DOCS = "PostgreSQL documentation: Write Ahead Log settings (wal_sync_method)"
METHOD_GAIN = 1.2  # the method in use must take this many times the best one's time
COMMIT_WAIT_SHARE = 0.30  # the commit path's share of active time: the why rule's threshold
MIN_CLIENTS = 4  # fewer clients rarely have another commit ready within the delay
DEFAULT_SIBLINGS = 5
MAX_COMMIT_DELAY_US = 100_000  # the setting's upper limit
DIP_SHARE = 0.20  # TPS during checkpoints this much below the rest: a dip
MIN_DIP_SECONDS = 3  # seconds needed on each side of the comparison
TARGET_COMPLETION = 0.9  # PostgreSQL's default since 14; lower values bunch the writes
DEFAULT_METHOD = {"linux": "fdatasync", "freebsd": "fdatasync"}


@dataclass(frozen=True)
class Advice:
    setting: str
    value: str
    current: str | None
    reason: str
    evidence: dict[str, JSONValue]
    source: str
    try_it: str | None = None  # how to try it: "--set commit_delay=250"
    note: str | None = None  # why howfast cannot try it here, when it cannot

    def document(self) -> dict[str, JSONValue]:
        return {
            "setting": self.setting,
            "value": self.value,
            "current": self.current,
            "reason": self.reason,
            "evidence": dict(self.evidence),
            "source": self.source,
            "try": self.try_it,
            "note": self.note,
        }


@dataclass(frozen=True)
class CommitWait:
    """A pgbench step whose sessions waited on WAL flushes."""

    label: str
    clients: int
    commit_share: float  # of active time, in the commit path (analysis/why.py)
    flushes_on: bool


@dataclass(frozen=True)
class WalCheckpoints:
    """A step during which checkpoints were started by WAL volume (max_wal_size)."""

    label: str
    by_wal: int
    wal_bytes: int
    seconds: float
    checkpoint_timeout_s: float | None
    completion_target: float | None
    max_wal_size_mb: float | None


@dataclass(frozen=True)
class Dip:
    """TPS during and outside the checkpoints of a step."""

    label: str
    during: float
    outside: float
    seconds_during: int
    seconds_outside: int
    completion_target: float | None


@dataclass
class AdviceFacts:
    target: str
    kind: str  # local, k8s: howfast's server; dsn: not ours; path: no server
    settings: dict[str, str] = field(default_factory=dict)
    platform: str | None = None
    durability: str | None = None  # the target's verdict (analysis/durability.py)
    durability_rule: str | None = None  # and its rule
    least_flush_ms: float | None = None  # the fastest flush the data medium allows
    methods_us: dict[str, float] = field(default_factory=dict)  # pg_test_fsync, one 8 kB write
    method_runs: list[dict[str, float]] = field(default_factory=list)  # each run's, the same
    fio_flush_ms: float | None = None  # fio wal-fsync: write + fdatasync
    commit_waits: list[CommitWait] = field(default_factory=list)
    wal_checkpoints: list[WalCheckpoints] = field(default_factory=list)
    dips: list[Dip] = field(default_factory=list)


def _applies(facts: AdviceFacts, setting: str, value: str) -> tuple[str | None, str | None]:
    """(how to try it, why it cannot be tried here)."""
    if facts.kind == "dsn":
        return None, (
            "an existing server: its settings are its administrator's; howfast did not "
            "change them and cannot try this one"
        )
    if facts.kind == "path":
        return None, "a storage probe: set it on the server that will use this storage"
    return f"--set {setting}={value}", None


def _make(
    facts: AdviceFacts,
    setting: str,
    value: str,
    current: str | None,
    reason: str,
    evidence: dict[str, JSONValue],
    source: str,
) -> Advice:
    try_it, note = _applies(facts, setting, value)
    return Advice(setting, value, current, reason, evidence, source, try_it, note)


def _us(value: float) -> str:
    return f"{value:,.0f} µs"


def wal_sync_method(facts: AdviceFacts) -> list[Advice]:
    flushing = FLUSHING_METHODS.get(facts.platform or "")
    if not facts.methods_us or flushing is None:
        return []
    if facts.durability != "durable":
        return []  # in memory, skipped, in doubt or unknown: no time is known to be a flush's
    current = facts.settings.get("wal_sync_method") or DEFAULT_METHOD.get(facts.platform or "")
    if current is None or current not in facts.methods_us:
        return []
    least_us = (facts.least_flush_ms or 0.0) * 1000
    safe = {m: us for m, us in facts.methods_us.items() if m in flushing and us >= least_us}
    if not safe:
        return []
    best = min(safe, key=lambda m: safe[m])
    now_us, best_us = facts.methods_us[current], safe[best]
    if best == current or now_us < METHOD_GAIN * best_us:
        return []
    # Short pg_test_fsync tests are noisy: the gain must hold in every run.
    runs = [r for r in facts.method_runs if best in r and current in r] or [facts.methods_us]
    if any(r[current] < METHOD_GAIN * r[best] for r in runs):
        return []
    left_out = sorted(set(facts.methods_us) - set(safe))
    reason = (
        f"pg_test_fsync measured {best} at {_us(best_us)} per 8 kB write and flush, "
        f"{current} (in use) at {_us(now_us)}: {1 - best_us / now_us:.0%} less time per WAL "
        f"flush; {best} flushes on {PLATFORM_NAMES.get(facts.platform or '', facts.platform)}"
    )
    if left_out:
        reason += f" ({', '.join(left_out)} left out: faster than the medium allows)"
    reason += (
        f"; measured by {len(runs)} pg_test_fsync run{'s' if len(runs) > 1 else ''}, one 8 kB "
        "write per flush: confirm it with your own workload"
    )
    evidence: dict[str, JSONValue] = {
        "pg_test_fsync_usecs": {m: round(us, 1) for m, us in facts.methods_us.items()},
        "pg_test_fsync_runs": len(runs),
        "platform": facts.platform,
        "least_flush_ms": facts.least_flush_ms,
    }
    return [_make(facts, "wal_sync_method", best, current, reason, evidence, SETTINGS_DOCS)]


def commit_delay(facts: AdviceFacts) -> list[Advice]:
    waits = [
        w
        for w in facts.commit_waits
        if w.flushes_on and w.clients >= MIN_CLIENTS and w.commit_share >= COMMIT_WAIT_SHARE
    ]
    if not waits or facts.durability_rule in ("in memory", "fsync=off", "synchronous_commit=off"):
        return []
    method = facts.settings.get("wal_sync_method") or DEFAULT_METHOD.get(facts.platform or "")
    if method in facts.methods_us:
        flush_us, source = facts.methods_us[str(method)], f"pg_test_fsync {method}"
    elif facts.fio_flush_ms is not None:
        flush_us, source = facts.fio_flush_ms * 1000, "fio wal-fsync (write + fdatasync)"
    else:
        return []
    value = min(MAX_COMMIT_DELAY_US, max(1, round(flush_us / 2)))
    current = facts.settings.get("commit_delay", "0")
    worst = max(waits, key=lambda w: w.commit_share)
    evidence: dict[str, JSONValue] = {
        "steps": [
            {"step": w.label, "clients": w.clients, "wait_commit_share": round(w.commit_share, 3)}
            for w in waits
        ],
        "flush_us": round(flush_us, 1),
        "flush_source": source,
    }
    out = []
    if _number(current) != value:
        reason = (
            f"{worst.label}: {worst.commit_share:.0%} of active time waiting on WAL flushes; a "
            f"delay of half a flush ({source}: {_us(flush_us)}) lets more commits share "
            "each flush (group commit); it costs latency when few commits are ready, so "
            "measure it"
        )
        out.append(_make(facts, "commit_delay", str(value), current, reason, evidence, WAL_DOCS))
    clients = max(w.clients for w in waits)
    siblings = _number(facts.settings.get("commit_siblings", str(DEFAULT_SIBLINGS)))
    if siblings is not None and clients - 1 < siblings:
        reason = (
            f"the delay happens only when at least commit_siblings other transactions are "
            f"active; at {clients} clients there are at most {clients - 1}"
        )
        out.append(
            _make(
                facts,
                "commit_siblings",
                str(clients - 1),
                str(int(siblings)),
                reason,
                {"clients": clients},
                WAL_DOCS,
            )
        )
    return out


def max_wal_size(facts: AdviceFacts) -> list[Advice]:
    if not facts.wal_checkpoints:
        return []
    best: tuple[float, WalCheckpoints] | None = None
    for w in facts.wal_checkpoints:
        timeout = w.checkpoint_timeout_s or 300.0
        target = w.completion_target if w.completion_target is not None else 0.9
        # A checkpoint starts when the WAL since the last one reaches
        # max_wal_size / (1 + checkpoint_completion_target).
        needed_mb = w.wal_bytes / w.seconds * timeout * (1 + target) / 2**20
        if best is None or needed_mb > best[0]:
            best = (needed_mb, w)
    assert best is not None
    needed_mb, w = best
    current_mb = w.max_wal_size_mb
    value_mb = round_up_mb(max(needed_mb, 2 * current_mb if current_mb else 0.0))
    rate = w.wal_bytes / w.seconds / 1e6
    reason = (
        f"{w.label}: {w.by_wal} checkpoint(s) started by WAL volume (max_wal_size) in "
        f"{w.seconds:.0f} s; at the {rate:.1f} MB/s of WAL measured, checkpoint_timeout "
        f"({w.checkpoint_timeout_s or 300:.0f} s) would start them with max_wal_size of at "
        f"least {_size(needed_mb)}; the rate includes the full-page images that follow each "
        "checkpoint, so fewer checkpoints need less"
    )
    evidence: dict[str, JSONValue] = {
        "step": w.label,
        "checkpoints_by_wal": w.by_wal,
        "wal_bytes": w.wal_bytes,
        "seconds": round(w.seconds, 1),
        "wal_mb_per_s": round(rate, 2),
        "checkpoint_timeout_s": w.checkpoint_timeout_s,
        "checkpoint_completion_target": w.completion_target,
        "needed_mb": round(needed_mb, 1),
    }
    # In force during the step (a plan may vary it), else the target's.
    current = _size(current_mb) if current_mb else facts.settings.get("max_wal_size")
    return [_make(facts, "max_wal_size", _size(value_mb), current, reason, evidence, WAL_DOCS)]


def checkpoint_completion_target(facts: AdviceFacts) -> list[Advice]:
    dips = [
        d
        for d in facts.dips
        if d.completion_target is not None
        and d.completion_target < TARGET_COMPLETION
        and d.seconds_during >= MIN_DIP_SECONDS
        and d.seconds_outside >= MIN_DIP_SECONDS
        and d.outside > 0
        and d.during <= (1 - DIP_SHARE) * d.outside
    ]
    if not dips:
        return []
    worst = min(dips, key=lambda d: d.during / d.outside)
    reason = (
        f"{worst.label}: {worst.during:,.0f} TPS during checkpoints, {worst.outside:,.0f} "
        f"outside ({1 - worst.during / worst.outside:.0%} less) with "
        f"checkpoint_completion_target {worst.completion_target:g}: spreading a checkpoint's "
        f"writes over {TARGET_COMPLETION:.0%} of the interval instead softens the dip"
    )
    evidence: dict[str, JSONValue] = {
        "steps": [
            {
                "step": d.label,
                "tps_during_checkpoints": round(d.during, 1),
                "tps_outside_checkpoints": round(d.outside, 1),
                "seconds_during": d.seconds_during,
                "seconds_outside": d.seconds_outside,
                "checkpoint_completion_target": d.completion_target,
            }
            for d in dips
        ],
    }
    current = f"{worst.completion_target:g}"  # in force during the step (a plan may vary it)
    return [
        _make(
            facts,
            "checkpoint_completion_target",
            f"{TARGET_COMPLETION:g}",
            current,
            reason,
            evidence,
            WAL_DOCS,
        )
    ]


def advise(facts: AdviceFacts) -> list[Advice]:
    """Every piece of advice the facts support, in the order of docs/why.md."""
    return [
        *wal_sync_method(facts),
        *commit_delay(facts),
        *max_wal_size(facts),
        *checkpoint_completion_target(facts),
    ]


# -- one line per piece of advice, for the reports ----------------------------------------------


@dataclass(frozen=True)
class AdviceLine:
    run_id: int
    target: str
    title: str  # the target as the report names it
    sentence: str
    doc: Mapping[str, JSONValue]  # the advice's document


def advice_lines(run: RunRecord, target_title: Mapping[str, str] | None = None) -> list[AdviceLine]:
    """One line per piece of advice of a derived run, target by target."""
    lines = []
    for target in run.targets:
        found = target.derived.get("advice")
        title = (target_title or {}).get(target.name, target.name)
        for doc in found if isinstance(found, list) else []:
            if not isinstance(doc, Mapping):
                continue
            now = f" (now {doc['current']})" if doc.get("current") is not None else ""
            text = f"{title}: {doc.get('setting')} = {doc.get('value')}{now}: {doc.get('reason')}"
            how = doc.get("note") or f"try it: {doc.get('try')}"
            text += f" [{how}; source: {doc.get('source')}]"
            lines.append(AdviceLine(run.id, target.name, title, text, doc))
    return lines


# -- settings as PostgreSQL writes them ---------------------------------------------------------

_SIZE_MB = {"b": 1 / 2**20, "kb": 1 / 1024, "mb": 1.0, "gb": 1024.0, "tb": 1024.0**2}
_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def size_mb(text: str | None) -> float | None:
    """'1GB' -> 1024.0; a bare number is in MB (max_wal_size's unit)."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kMGT]?B)?\s*", text or "")
    if not found:
        return None
    return float(found.group(1)) * _SIZE_MB[(found.group(2) or "MB").lower()]


def seconds(text: str | None) -> float | None:
    """'5min' -> 300.0; a bare number is in seconds (checkpoint_timeout's unit)."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(us|ms|s|min|h|d)?\s*", text or "")
    if not found:
        return None
    return float(found.group(1)) * _SECONDS[found.group(2) or "s"]


def round_up_mb(mb: float) -> float:
    """A size as one would write it: whole GB from 1 GB, else the next power of two MB."""
    if mb > 1024:
        return 1024.0 * math.ceil(mb / 1024)
    return float(2 ** max(0, math.ceil(math.log2(max(mb, 1.0)))))


def _size(mb: float) -> str:
    return f"{mb / 1024:g}GB" if mb >= 1024 and mb % 1024 == 0 else f"{mb:.0f}MB"
