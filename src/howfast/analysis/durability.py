"""Durability: could the commits a run measured survive a crash of the machine? One verdict
per target, derived when a run is read, by the rules of docs/why.md ("Durability").

The rules are pure functions of `DurabilityFacts` (gathered from a stored run by
analysis/durability_facts.py; tests build them directly). Verdicts, worst first:

- **not durable**: the data or WAL lives in memory, or a setting lets PostgreSQL skip what
  makes a commit survive (fsync, full_page_writes, synchronous_commit off);
- **in doubt**: something measured is faster than the medium allows (a flush that cannot have
  reached stable storage), or the wal_sync_method does not flush the drive's cache on the
  server's platform;
- **durable**: as far as can be told: safe settings, and flushes that reach a device without
  a volatile cache or that take the time a flush takes;
- **unknown**: what would tell was not recorded or not measured; never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from howfast.model import JSONValue, RunRecord

VERDICTS = ("not durable", "in doubt", "durable", "unknown")

# -- thresholds (docs/why.md says why each was chosen) -----------------------------------------
ROTATIONAL_MIN_FLUSH_MS = 1.0  # a platter turns once in 4 ms (15k rpm) to 11 ms (5400 rpm)
WRITE_BACK_MIN_FLUSH_MS = 0.1  # a volatile cache emptied to flash or disk takes longer
FASTER_THAN_LOCAL = 0.9  # a network flush below this share of the local disk's: faster

# Methods that make the kernel flush the drive's cache (or write through it), by platform
# (PostgreSQL documentation, "Reliability"): on macOS only fsync_writethrough does; on Windows
# open_datasync (the default there) does not.
FLUSHING_METHODS = {
    "linux": frozenset({"fdatasync", "fsync", "open_datasync", "open_sync"}),
    "freebsd": frozenset({"fdatasync", "fsync", "open_datasync", "open_sync"}),
    "macos": frozenset({"fsync_writethrough"}),
    "windows": frozenset({"fsync_writethrough", "fsync", "fdatasync"}),
}
PLATFORM_NAMES = {"linux": "Linux", "freebsd": "FreeBSD", "macos": "macOS", "windows": "Windows"}
# Filesystems whose writes of a page cannot be torn: full_page_writes=off may be safe there.
NO_TORN_PAGES = frozenset({"zfs"})
SETTINGS = ("fsync", "full_page_writes", "synchronous_commit", "wal_sync_method")


@dataclass(frozen=True)
class Medium:
    """What holds one role's files (data, WAL), as far as the target's record says.

    kind: "memory", "local" (a disk of this machine or node), "network" (a network or
    replicated volume), "emulated" (howfast's emulated volume) or "unknown"; `what` names it
    ("tmpfs", "vda", "StorageClass longhorn (driver.longhorn.io)"). rotational and write_cache
    are the kernel's word on the device under the files (None: not recorded); `virtual` says
    why the rotational flag says nothing of the medium (a virtual disk), when it does not."""

    role: str
    kind: str
    what: str
    fstype: str | None = None
    rotational: bool | None = None
    write_cache: str | None = None  # "write back" | "write through"
    virtual: str | None = None
    shared_with: str | None = None  # the role whose medium this is as well

    def document(self) -> dict[str, JSONValue]:
        return {
            "role": self.role,
            "medium": self.kind,
            "what": self.what,
            "fstype": self.fstype or "unknown",
            "rotational": self.rotational if self.rotational is not None else "unknown",
            "write_cache": self.write_cache or "unknown",
            "virtual": self.virtual,
        }


@dataclass(frozen=True)
class Flush:
    """A measured time per flush. `bound`: a whole transaction (pgbench at 1 client), which
    only bounds the flush from above."""

    source: str  # "fio wal-fsync", "pg_test_fsync fdatasync", "tpcb-like at 1 client (pgbench)"
    role: str  # the role whose device it timed
    ms: float
    bound: bool = False
    runs: int = 1

    def document(self) -> dict[str, JSONValue]:
        return {
            "source": self.source,
            "role": self.role,
            "ms": round(self.ms, 4),
            "upper_bound": self.bound,
            "runs": self.runs,
        }


@dataclass(frozen=True)
class StepSettings:
    """A step that ran with its own durability settings, other than the target's."""

    step: str  # its id
    label: str  # "tpcb-like at 1 client"
    settings: dict[str, str]


@dataclass
class DurabilityFacts:
    target: str
    kind: str  # the target's kind: local, dsn, k8s, path, import
    server: bool  # PostgreSQL ran there, with these settings (False: a storage probe)
    settings: dict[str, str] = field(default_factory=dict)  # SETTINGS as recorded
    platform: str | None = None  # "linux", "macos", "windows", "freebsd"; None: unknown
    media: list[Medium] = field(default_factory=list)
    media_note: str | None = None  # why there are none: "an existing server's storage ..."
    flushes: list[Flush] = field(default_factory=list)
    local: dict[str, tuple[str, float]] = field(default_factory=dict)  # source -> (target, ms)
    steps: list[StepSettings] = field(default_factory=list)


@dataclass(frozen=True)
class Finding:
    verdict: str
    rule: str
    reason: str
    consequence: str | None = None

    def document(self) -> dict[str, JSONValue]:
        return {
            "verdict": self.verdict,
            "rule": self.rule,
            "reason": self.reason,
            "consequence": self.consequence,
        }


@dataclass
class Durability:
    verdict: str
    reason: str
    rule: str
    consequence: str | None = None
    evidence: dict[str, JSONValue] = field(default_factory=dict)
    also: list[Finding] = field(default_factory=list)
    steps: list[dict[str, JSONValue]] = field(default_factory=list)  # steps judged apart

    def document(self) -> dict[str, JSONValue]:
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "rule": self.rule,
            "consequence": self.consequence,
            "evidence": dict(self.evidence),
            "also": [f.document() for f in self.also],
            "steps": list(self.steps),
        }


def least_flush_ms(medium: Medium) -> float:
    """The fastest flush this medium allows: a rotating disk's (unless the flag is a virtual
    disk's default), else one that empties a volatile cache to flash."""
    if medium.rotational and not medium.virtual:
        return ROTATIONAL_MIN_FLUSH_MS
    return WRITE_BACK_MIN_FLUSH_MS


def _off(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("off", "false", "0", "no")


def _ms(value: float) -> str:
    return f"{value * 1000:.0f} µs" if value < 1 else f"{value:.2f} ms"


# -- the rules ---------------------------------------------------------------------------------


def settings_findings(settings: dict[str, str], media: list[Medium]) -> list[Finding]:
    """What the settings let PostgreSQL skip, worst first."""
    out = []
    if _off(settings.get("fsync")):
        out.append(
            Finding(
                "not durable",
                "fsync=off",
                "fsync=off: PostgreSQL never makes the kernel write its files to the storage, so "
                "a crash of the machine (power loss, kernel panic) can leave the database corrupt",
                "corruption",
            )
        )
    if _off(settings.get("full_page_writes")):
        cow = sorted({m.fstype for m in media if m.fstype in NO_TORN_PAGES})
        if cow:
            out.append(
                Finding(
                    "in doubt",
                    "full_page_writes=off",
                    f"full_page_writes=off on {', '.join(cow)}, which never writes a page in "
                    "place: safe only if it writes each 8 kB page whole (PostgreSQL's docs name "
                    "ZFS as such a filesystem)",
                )
            )
        else:
            out.append(
                Finding(
                    "not durable",
                    "full_page_writes=off",
                    "full_page_writes=off: a page being written when the machine crashed can be "
                    "left half old, half new (a torn page), which WAL replay cannot repair: "
                    "corruption after a crash",
                    "corruption",
                )
            )
    if _off(settings.get("synchronous_commit")):
        out.append(
            Finding(
                "not durable",
                "synchronous_commit=off",
                "synchronous_commit=off: a commit returns before its WAL is flushed, so a crash "
                "loses the transactions of the last moments (up to 3 x wal_writer_delay, 600 ms by "
                "default) that clients were told had committed; the database stays consistent "
                "(no corruption)",
                "recent commits lost",
            )
        )
    return out


def memory_findings(media: list[Medium], server: bool = True) -> list[Finding]:
    held = [m for m in media if m.kind == "memory"]
    if not held:
        return []
    where = ", ".join(sorted({m.what for m in held}))
    if not server:  # a storage probe: no database, only what is written there
        return [
            Finding(
                "not durable",
                "in memory",
                f"the directory is in memory ({where}): a power loss or a reboot loses "
                "everything written there, whatever is flushed",
                "everything lost",
            )
        ]
    roles = " and ".join(dict.fromkeys("the WAL" if m.role == "wal" else "the data" for m in held))
    return [
        Finding(
            "not durable",
            "in memory",
            f"{roles} {'are' if ' and ' in roles else 'is'} in memory ({where}): a power loss or "
            "a reboot loses the whole database, whatever PostgreSQL flushes",
            "everything lost",
        )
    ]


def flush_findings(facts: DurabilityFacts) -> list[Finding]:
    """Flushes faster than the medium under them allows."""
    out: list[Finding] = []
    media = {m.role: m for m in facts.media}
    for flush in sorted(facts.flushes, key=lambda f: f.ms):
        medium = media.get(flush.role)
        if medium is None or medium.kind == "memory":
            continue
        timed = f"{flush.source} took {_ms(flush.ms)} per {'commit' if flush.bound else 'flush'}"
        rule = None
        if medium.rotational and not medium.virtual and flush.ms < ROTATIONAL_MIN_FLUSH_MS:
            rule, reason = (
                "rotational disk flushing under 1 ms",
                (
                    f"the {flush.role} device ({medium.what}) is a rotating disk, yet {timed}: "
                    "a platter cannot turn so fast, so a cache answered the flush (safe only if "
                    "it is battery- or flash-backed)"
                ),
            )
        elif medium.write_cache == "write back" and flush.ms < WRITE_BACK_MIN_FLUSH_MS:
            rule, reason = (
                "write-back cache flushing in microseconds",
                (
                    f"the {flush.role} device ({medium.what}) keeps writes in a volatile cache "
                    f"(write back), yet {timed}: too quick for the cache to have been emptied "
                    "to stable media (safe only if the device has power-loss protection)"
                ),
            )
        elif medium.kind == "network" and flush.source in facts.local:
            local_target, local_ms = facts.local[flush.source]
            if flush.ms < FASTER_THAN_LOCAL * local_ms:
                rule, reason = (
                    "network volume faster than local disk",
                    (
                        f"the {flush.role} volume ({medium.what}) is a network or replicated "
                        f"volume, yet {timed}, faster than the local disk of the same run "
                        f"({local_target}: {_ms(local_ms)}): a write that beats local storage "
                        "has most likely not been committed to a disk before the answer "
                        "(kbench's rule)"
                    ),
                )
        if rule and all(f.rule != rule for f in out):
            out.append(Finding("in doubt", rule, reason))
    return out


def method_findings(facts: DurabilityFacts) -> list[Finding]:
    method = facts.settings.get("wal_sync_method")
    if not facts.server or method is None or facts.platform not in FLUSHING_METHODS:
        return []
    if method in FLUSHING_METHODS[facts.platform]:
        return []
    hint = {
        "macos": "on macOS only fsync_writethrough flushes the drive's cache",
        "windows": "on Windows open_datasync leaves the drive's write cache on unless it is "
        "disabled in the drive's policies; fsync, fdatasync or fsync_writethrough do not",
    }.get(facts.platform, f"it does not flush on {PLATFORM_NAMES[facts.platform]}")
    return [
        Finding(
            "in doubt",
            "wal_sync_method",
            f"wal_sync_method={method}: {hint} (PostgreSQL's docs, Reliability)",
        )
    ]


def _confirmed(facts: DurabilityFacts) -> tuple[list[str], list[str]]:
    """(what shows each medium's flushes reach stable storage, what is missing)."""
    shown, missing = [], []
    for medium in facts.media:
        if medium.shared_with is not None:
            continue
        if medium.kind == "emulated":
            missing.append(
                f"the {medium.role} device is {medium.what}, which adds its own delay to every "
                "flush: its flush times say nothing of the storage under it"
            )
            continue
        if medium.write_cache == "write through":
            shown.append(
                f"the {medium.role} device ({medium.what}) has no volatile write "
                "cache (write through)"
            )
            continue
        least = least_flush_ms(medium)
        timed = [f for f in facts.flushes if f.role == medium.role and not f.bound]
        if timed and min(f.ms for f in timed) >= least:
            fastest = min(timed, key=lambda f: f.ms)
            cache = f", {medium.write_cache} cache" if medium.write_cache else ""
            shown.append(
                f"the {medium.role} device ({medium.what}{cache}) took "
                f"{_ms(fastest.ms)} per flush ({fastest.source}), as long as a flush "
                "to stable media takes"
            )
            continue
        cache = medium.write_cache or "not recorded"
        where = f"the {medium.role} device ({medium.what}; write cache: {cache})"
        if timed:
            fastest = min(timed, key=lambda f: f.ms)
            missing.append(
                f"{fastest.source} took {_ms(fastest.ms)} per flush on {where}: too quick to "
                "show that it reached stable media"
            )
        else:
            missing.append(
                f"no flush was timed on {where}: a probe times them (fio's wal-fsync "
                "profile, pg_test_fsync)"
            )
    return shown, missing


def _settings_text(facts: DurabilityFacts) -> str:
    method = facts.settings.get("wal_sync_method")
    text = "fsync, full_page_writes and synchronous_commit on"
    if method:
        text += f", wal_sync_method {method}"
    return text


def decide(facts: DurabilityFacts) -> Durability:
    """The rules of docs/why.md ("Durability"), worst verdict first."""
    evidence = evidence_of(facts)
    if facts.kind == "import":
        return Durability(
            "unknown",
            "imported results carry neither the server's settings nor its storage",
            "imported",
            evidence=evidence,
        )
    findings = memory_findings(facts.media, facts.server)
    if facts.server:
        findings += settings_findings(facts.settings, facts.media)
    findings += flush_findings(facts) + method_findings(facts)
    steps = _step_findings(facts, findings)
    for verdict in ("not durable", "in doubt"):
        held = [f for f in findings if f.verdict == verdict]
        if held:
            first = held[0]
            also = [f for f in findings if f is not first]
            return Durability(
                verdict, first.reason, first.rule, first.consequence, evidence, also, steps
            )
    missing = []
    settings_known = True
    if facts.server:
        unknown = [n for n in SETTINGS[:3] if n not in facts.settings]
        if unknown:
            settings_known = False
            missing.append(f"the settings {', '.join(unknown)} were not recorded")
        elif facts.platform is None and facts.settings.get("wal_sync_method"):
            missing.append(
                "the server's platform is not known, and with it whether "
                f"wal_sync_method={facts.settings['wal_sync_method']} flushes the "
                "drive's cache"
            )
    if not facts.media:
        missing.append(facts.media_note or "the storage was not recorded")
    shown, unconfirmed = _confirmed(facts)
    missing += unconfirmed
    settings = _settings_text(facts) if facts.server and settings_known else ""
    if missing:
        reason = (f"{settings}, but " if settings else "") + "; ".join(missing)
        return Durability("unknown", reason, "not enough evidence", evidence=evidence, steps=steps)
    reason = "as far as can be told: " + (f"{settings}; " if settings else "") + "; ".join(shown)
    return Durability(
        "durable",
        reason,
        "safe settings, flushes that reach stable media",
        evidence=evidence,
        steps=steps,
    )


def _step_findings(facts: DurabilityFacts, target: list[Finding]) -> list[dict[str, JSONValue]]:
    """Steps whose own settings make them less durable than their target."""
    rules = {f.rule for f in target}
    out: list[dict[str, JSONValue]] = []
    for step in facts.steps:
        worse = [f for f in settings_findings(step.settings, facts.media) if f.rule not in rules]
        if worse:
            out.append(
                {
                    "step": step.step,
                    "label": step.label,
                    "verdict": worse[0].verdict,
                    "reason": "; ".join(f.rule for f in worse),
                    "consequence": worse[0].consequence,
                }
            )
    return out


def evidence_of(facts: DurabilityFacts) -> dict[str, JSONValue]:
    """Everything the rules read, "unknown" where it was not recorded."""
    evidence: dict[str, JSONValue] = {
        "media": [m.document() for m in facts.media],
        "flushes": [f.document() for f in facts.flushes],
        "platform": facts.platform or "unknown",
    }
    if facts.media_note:
        evidence["media_note"] = facts.media_note
    if facts.server:
        evidence["settings"] = {n: facts.settings.get(n, "unknown") for n in SETTINGS}
    if facts.local:
        evidence["local_flushes"] = {
            source: {"target": target, "ms": round(ms, 4)}
            for source, (target, ms) in facts.local.items()
        }
    return evidence


# -- one line per target, for the reports ------------------------------------------------------


@dataclass(frozen=True)
class DurabilityLine:
    """A target's verdict as the reports show it: first, before any figure."""

    run_id: int
    target: str
    verdict: str
    sentence: str


def durability_lines(
    run: RunRecord, target_title: Mapping[str, str] | None = None
) -> list[DurabilityLine]:
    """One line per target of a derived run (targets without a verdict are left out)."""
    lines = []
    for target in run.targets:
        doc = target.derived.get("durability")
        if not isinstance(doc, Mapping):
            continue
        title = (target_title or {}).get(target.name, target.name)
        text = f"{title}: {doc.get('reason')}"
        for step in doc.get("steps") or []:
            if isinstance(step, Mapping):
                text += (
                    f"; but step {step.get('step')} ({step.get('label')}) ran with "
                    f"{step.get('reason')}: {step.get('verdict')}"
                )
        lines.append(DurabilityLine(run.id, target.name, str(doc.get("verdict")), text))
    return lines
