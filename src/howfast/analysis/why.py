"""Why: what limited a pgbench step, from what was sampled while it ran.

Two things here, all pure functions of a stored step (and the target's earlier steps):

- the **wait profile**: the share of active-session samples per wait event and per wait event
  type, from the counts the wait-event sampler stored (`postgres.wait_sampling`);
- **PostgreSQL's own I/O** beside the device's is analysis/own_io.py;
- the **verdict**: one limiting resource, chosen by the rules of docs/why.md, with its
  evidence and numbers, or "unclear" when no rule holds.

Nothing here guesses: a rule that lacks its data does not fire.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from howfast.analysis.client import network_reason
from howfast.analysis.hooks import evidence_of
from howfast.analysis.loaded_data import latest_load
from howfast.analysis.probe import commit_ceiling
from howfast.analysis.replication import sync_level
from howfast.analysis.working_set import regime_warnings
from howfast.model import JSONValue, RunRecord, StepRecord

# -- thresholds (docs/why.md says why each was chosen) -----------------------------------------
MIN_ACTIVE_SAMPLES = 20  # fewer active-session samples than this: no wait-based verdict
WAIT_RULE_SHARE = 0.30  # a wait class this large among active samples can set the pace
CPU_RULE_SHARE = 0.50  # CPU must be most of the active time to call the server CPU-bound
MACHINE_BUSY_PCT = 85.0  # user + system + steal of all cores: the machine has no CPU left
LOAD_GENERATOR_PCT = 90.0  # a pgbench thread above this share of a core is the limit
IDLE_SHARE = 0.50  # sessions idle more than this share of their time wait for pgbench
CEILING_SHARE = 0.80  # TPS per client this close to the commit ceiling: latency-bound
PROBE_IOPS_SHARE = 0.90  # device IOPS this close to the probe's maximum: throughput-bound
QUEUE_DEPTH = 4.0  # requests queued on average, with the device busy: throughput-bound
OWN_IOPS_MIN = 50.0  # below this the server hardly used a device: its saturation is not ours
UTIL_PCT = 90.0

# Wait events of the commit path: writing and flushing WAL, and waiting for another
# backend's flush (group commit).
COMMIT_EVENTS = frozenset(
    {
        "IO:WALSync",
        "IO:WALWrite",
        "IO:WALInitSync",
        "IO:WALInitWrite",
        "LWLock:WALWrite",
        "LWLock:WALWriteLock",
        "IPC:SyncRep",
    }
)
# A commit waiting for a synchronous standby: its own rule, not the local storage's latency.
SYNCREP_EVENT = "IPC:SyncRep"
LOCAL_COMMIT_EVENTS = COMMIT_EVENTS - {SYNCREP_EVENT}
READ_EVENTS = frozenset({"IO:DataFileRead", "IO:DataFilePrefetch", "IO:BufFileRead"})

VERDICTS = (
    "storage latency",
    "storage throughput",
    "synchronous replication",
    "server CPU",
    "load generator",
    "lock contention",
    "memory/cache",
    "network",
    "unclear",
)
# How a sentence names each verdict: "... is limited by <this>".
LIMITED_BY = {
    "storage latency": "WAL flush latency",
    "storage throughput": "storage throughput",
    "synchronous replication": "synchronous replication",
    "server CPU": "the server's CPU",
    "load generator": "the load generator (pgbench)",
    "lock contention": "lock contention",
    "memory/cache": "memory: caches, not the storage, served it",
    "network": "the round trips to the server",
}


# -- the wait profile ----------------------------------------------------------------------


@dataclass
class Profile:
    events: list[tuple[str, str | None, float, int]]  # (type, event, share, samples), largest first
    types: dict[str, float]  # type -> share
    active: int  # active-session samples
    readings: int
    source: str | None
    idle_share: float | None  # of all session samples, the share not active (pg_stat_activity)
    sessions: int = 0  # session samples, active or not

    def share(self, keys: frozenset[str]) -> float:
        return sum(s for t, e, s, _ in self.events if f"{t}:{e or ''}" in keys)

    def type_share(self, wait_type: str, leave_out: frozenset[str] = frozenset()) -> float:
        return sum(
            s for t, e, s, _ in self.events if t == wait_type and f"{t}:{e or ''}" not in leave_out
        )


def wait_profile(postgres: Mapping[str, Any]) -> Profile | None:
    """The step's wait profile from the sampler's counts; None when it did not run."""
    sampling = postgres.get("wait_sampling")
    if not isinstance(sampling, Mapping):
        return None
    counts = sampling.get("counts")
    counts = {str(k): int(v) for k, v in (counts or {}).items() if isinstance(v, int | float)}
    active = sum(counts.values())
    events = []
    types: dict[str, float] = {}
    for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        wait_type, _, event = key.partition(":")
        share = n / active if active else 0.0
        events.append((wait_type, event or None, share, n))
        types[wait_type] = types.get(wait_type, 0.0) + share
    states = sampling.get("states")
    idle_share = None
    total = 0
    if isinstance(states, Mapping):
        total = sum(int(v) for v in states.values() if isinstance(v, int | float))
        if total:
            idle_share = 1.0 - int(states.get("active", 0) or 0) / total
    readings = sampling.get("readings")
    return Profile(
        events,
        dict(sorted(types.items(), key=lambda kv: -kv[1])),
        active,
        int(readings) if isinstance(readings, int | float) else 0,
        str(sampling.get("source")) if sampling.get("source") else None,
        idle_share,
        total,
    )


def profile_sections(profile: Profile) -> dict[str, JSONValue]:
    """`postgres.wait_events` (the shape the Prometheus export reads) and
    `postgres.wait_event_types`."""
    return {
        "wait_events": [
            {"wait_event_type": t, "wait_event": e, "share": round(s, 4), "samples": n}
            for t, e, s, n in profile.events
        ],
        "wait_event_types": [
            {"wait_event_type": t, "share": round(s, 4)} for t, s in profile.types.items()
        ],
        "wait_source": profile.source,
        "active_sessions_avg": (
            round(profile.active / profile.readings, 3) if profile.readings else None
        ),
    }


def profile_metrics(profile: Profile) -> dict[str, JSONValue]:
    return {
        "wait_cpu_share": round(profile.types.get("CPU", 0.0), 4),
        "wait_io_share": round(profile.types.get("IO", 0.0), 4),
        "wait_lock_share": round(profile.types.get("Lock", 0.0), 4),
        "wait_lwlock_share": round(profile.types.get("LWLock", 0.0), 4),
        "wait_commit_share": round(profile.share(COMMIT_EVENTS), 4),
        "active_sessions_avg": (
            round(profile.active / profile.readings, 3) if profile.readings else None
        ),
    }


def describe_top(profile: Profile, n: int = 3) -> str:
    """'IO:WALSync 41%, CPU 33%, LWLock:WALWrite 12%'"""
    return ", ".join(f"{_event(t, e)} {s:.0%}" for t, e, s, _ in profile.events[:n])


def _event(wait_type: str, event: str | None) -> str:
    return wait_type if event is None else f"{wait_type}:{event}"


# -- the verdict ---------------------------------------------------------------------------


@dataclass
class Verdict:
    verdict: str
    reason: str
    evidence: dict[str, JSONValue] = field(default_factory=dict)
    rule: str = ""
    also: list[str] = field(default_factory=list)  # other rules that held, weaker

    def section(self) -> dict[str, JSONValue]:
        return {
            "verdict": self.verdict,
            "verdict_reason": self.reason,
            "verdict_evidence": dict(self.evidence),
            "rule": self.rule,
            "limited_by": LIMITED_BY.get(self.verdict),
            "also": list(self.also),
        }


@dataclass
class StepFacts:
    """What the rules read, gathered from a step (tests build it directly)."""

    mode: str | None = None
    clients: int | None = None
    scale: int | None = None
    tps: float | None = None
    profile: Profile | None = None
    pgbench_thread_pct: float | None = None
    pgbench_threads: int | None = None
    machine_busy_pct: float | None = None
    flushes_off: str | None = None  # "fsync=off" / "synchronous_commit=off"
    ceiling_tps: float | None = None  # the commit-rate ceiling of the target's probe
    flush_ms: float | None = None
    probe_max_iops: float | None = None
    device: dict[str, dict[str, float]] = field(default_factory=dict)  # role -> figures
    regime_problem: str | None = None  # an on-disk step served by caches, or the reverse
    # The lag a commit waits for at the sync level ("flush" for on) and its p50, in ms
    sync_lag: str | None = None
    sync_lag_p50_ms: float | None = None
    # analysis/client.py's sentence when round trips take >= half a transaction's time
    network: str | None = None
    client_rtt_p50_ms: float | None = None


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _pct(share: float) -> str:
    return f"{share:.0%}"


def _n(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


# The rules of docs/why.md, in their order (RULES). A rule reads the facts and, when it
# holds, gives its verdict with a weight. Three stages:
# - DECISIVE rules (the load generator, the regime) decide alone, before any other;
# - WEIGHED rules (storage latency ... server CPU) all run: the heaviest that held is the
#   verdict, the others that held its `also`;
# - FALLBACK rules (the network, idle sessions) decide only when no weighed rule held;
# and "unclear" when no rule holds.
DECISIVE, WEIGHED, FALLBACK = "decisive", "weighed", "fallback"
Weighed = tuple[float, Verdict]  # a rule that held: its weight among the weighed, its verdict


@dataclass(frozen=True)
class Rule:
    name: str
    stage: str  # DECISIVE, WEIGHED or FALLBACK
    check: Callable[[StepFacts], Weighed | None]  # None: the rule does not hold


def _sampled(f: StepFacts) -> Profile | None:
    """The wait profile when it has enough active samples for a wait-based rule."""
    p = f.profile
    return p if p is not None and p.active >= MIN_ACTIVE_SAMPLES else None


def _top(p: Profile, wanted: Callable[[str, str | None], bool]) -> str:
    """The two largest wanted wait events: 'IO:WALSync 41%, LWLock:WALWrite 12%'."""
    top = [(t, e, s) for t, e, s, _ in p.events if wanted(t, e)][:2]
    return ", ".join(f"{_event(t, e)} {s:.0%}" for t, e, s in top)


def _load_generator_thread(f: StepFacts) -> Weighed | None:
    """1. The load generator: a pgbench thread at a full core asks for no more."""
    if f.pgbench_thread_pct is None or f.pgbench_thread_pct <= LOAD_GENERATOR_PCT:
        return None
    return 1.0, Verdict(
        "load generator",
        f"pgbench's busiest thread used {f.pgbench_thread_pct:.0f}% of a CPU core "
        f"({f.pgbench_threads or 1} thread(s)): it could not ask for more",
        {"pgbench_thread_cpu_max_pct": round(f.pgbench_thread_pct, 1)},
        "pgbench thread above 90% of a core",
    )


def _regime(f: StepFacts) -> Weighed | None:
    """2. Memory or cache: the step did not measure what its regime says."""
    if not f.regime_problem:
        return None
    return 1.0, Verdict("memory/cache", f.regime_problem, {}, "working-set regime not met")


def _storage_latency(f: StepFacts) -> Weighed | None:
    """3. Storage latency: commits wait for the local WAL flushes."""
    p = _sampled(f)
    per_client = (f.tps / f.clients) if f.tps and f.clients else None
    ceiling_share = per_client / f.ceiling_tps if per_client is not None and f.ceiling_tps else None
    commit = p.share(LOCAL_COMMIT_EVENTS) if p else 0.0
    legacy = f.profile is None  # no wait sampling (older or imported runs): the figures alone
    if f.flushes_off is not None or not (
        commit >= WAIT_RULE_SHARE
        or (legacy and ceiling_share is not None and ceiling_share >= CEILING_SHARE)
    ):
        return None
    evidence: dict[str, JSONValue] = {}
    parts = []
    if p:
        local = _top(p, lambda t, e: f"{t}:{e or ''}" in LOCAL_COMMIT_EVENTS)
        parts.append(f"{_pct(commit)} of active time in the commit path ({local})")
        evidence["wait_commit_share"] = round(commit, 4)
    if per_client is not None and f.ceiling_tps and ceiling_share is not None:
        parts.append(
            f"{_n(per_client)} TPS per client = {ceiling_share:.0%} of the "
            f"{_n(f.ceiling_tps)} commits/s the storage allows"
        )
        evidence.update(
            tps_per_client=round(per_client, 2),
            commit_ceiling_tps=round(f.ceiling_tps, 1),
            commit_ceiling_share=round(ceiling_share, 3),
        )
    return commit if p else ceiling_share or 0.0, Verdict(
        "storage latency",
        "; ".join(parts),
        evidence,
        "commit-path waits >= 30% (or TPS per client >= 80% of the ceiling)",
    )


def _synchronous_replication(f: StepFacts) -> Weighed | None:
    """3b. Synchronous replication: commits wait for a standby's reply."""
    p = _sampled(f)
    syncrep = p.share(frozenset({SYNCREP_EVENT})) if p else 0.0
    if syncrep < WAIT_RULE_SHARE:
        return None
    reason = f"{_pct(syncrep)} of active time waiting for the standby"
    evidence: dict[str, JSONValue] = {"wait_syncrep_share": round(syncrep, 4)}
    if f.sync_lag and f.sync_lag_p50_ms is not None:
        reason += f"; {f.sync_lag} lag p50 {f.sync_lag_p50_ms:.2g} ms"
        evidence[f"replication_{f.sync_lag}_lag_p50_ms"] = f.sync_lag_p50_ms
    return syncrep, Verdict("synchronous replication", reason, evidence, "SyncRep waits >= 30%")


def _lock_contention(f: StepFacts) -> Weighed | None:
    """4. Lock contention."""
    p = _sampled(f)
    lock = (p.type_share("Lock") + p.type_share("LWLock", COMMIT_EVENTS)) if p else 0.0
    if lock < WAIT_RULE_SHARE or not p:
        return None
    locks = _top(p, lambda t, e: t in ("Lock", "LWLock") and f"{t}:{e or ''}" not in COMMIT_EVENTS)
    reason = f"{_pct(lock)} of active time waiting for locks ({locks})"
    evidence: dict[str, JSONValue] = {"wait_lock_share": round(lock, 4)}
    if (
        f.mode in ("tpcb-like", "simple-update")
        and f.scale is not None
        and f.clients is not None
        and f.scale < f.clients
    ):
        reason += (
            f"; scale {f.scale} < clients {f.clients}: every transaction updates one of "
            f"{f.scale} branch row(s), so sessions queue on them"
        )
        evidence.update(scale=f.scale, clients=f.clients)
    return lock, Verdict("lock contention", reason, evidence, "lock waits >= 30%")


def _saturated_devices(f: StepFacts) -> list[str]:
    """The devices at their limit: busy with requests queued, or near the probe's IOPS."""
    saturated = []
    for role, fig in f.device.items():
        util, queue = fig.get("util_pct"), fig.get("queue_depth")
        iops = (fig.get("read_iops") or 0.0) + (fig.get("write_iops") or 0.0)
        if fig.get("own") and iops < OWN_IOPS_MIN:
            continue  # the server hardly used this device: whatever kept it busy, not this test
        if util is not None and queue is not None and util >= UTIL_PCT and queue >= QUEUE_DEPTH:
            saturated.append(f"the {role} device {util:.0f}% busy with {queue:.1f} requests queued")
        if f.probe_max_iops and iops >= PROBE_IOPS_SHARE * f.probe_max_iops:
            whose = "PostgreSQL's own I/O on the" if fig.get("own") else "the"
            saturated.append(
                f"{whose} {role} device at {_n(iops)} IOPS = {iops / f.probe_max_iops:.0%} of "
                f"the probe's {_n(f.probe_max_iops)}"
            )
    return saturated


def _storage_throughput(f: StepFacts) -> Weighed | None:
    """5. Storage throughput: data-file I/O waits, or the device at its limit."""
    p = _sampled(f)
    data_io = p.type_share("IO", COMMIT_EVENTS) if p else 0.0
    reads = p.share(READ_EVENTS) if p else 0.0
    saturated = _saturated_devices(f)
    if data_io < WAIT_RULE_SHARE and not saturated:
        return None
    parts = []
    if data_io >= WAIT_RULE_SHARE and p:
        files = _top(p, lambda t, e: t == "IO" and f"IO:{e or ''}" not in COMMIT_EVENTS)
        parts.append(f"{_pct(data_io)} of active time in data-file I/O ({files})")
    parts += saturated
    legacy = f.profile is None
    return max(data_io, 0.5 if saturated and legacy else 0.0), Verdict(
        "storage throughput",
        "; ".join(parts),
        {"wait_data_io_share": round(data_io, 4), "wait_read_share": round(reads, 4)},
        "data-file I/O waits >= 30%, or the device saturated",
    )


def _server_cpu(f: StepFacts) -> Weighed | None:
    """6. Server CPU: active time on CPU, and the machine's cores busy."""
    p = _sampled(f)
    cpu = p.types.get("CPU", 0.0) if p else 0.0
    busy = f.machine_busy_pct
    legacy = f.profile is None
    if busy is None or busy < MACHINE_BUSY_PCT or not (cpu >= CPU_RULE_SHARE or legacy):
        return None
    reason = f"the cores were {busy:.0f}% busy"
    if p:
        reason = f"{_pct(cpu)} of active time on CPU, and " + reason
    return cpu if p else 0.5, Verdict(
        "server CPU",
        reason,
        {"wait_cpu_share": round(cpu, 4), "cpu_busy_pct": round(busy, 1)},
        "CPU >= 50% of active time and cores >= 85% busy",
    )


def _network(f: StepFacts) -> Weighed | None:
    """6c. The network: the client-server round trips take half a transaction's time or more."""
    if not f.network:
        return None
    evidence: dict[str, JSONValue] = {}
    if f.client_rtt_p50_ms is not None:
        evidence["client_rtt_p50_ms"] = f.client_rtt_p50_ms
    return 1.0, Verdict(
        "network", f.network, evidence, "round trips >= 50% of a transaction's time"
    )


def _idle_sessions(f: StepFacts) -> Weighed | None:
    """7. The sessions mostly waited for pgbench: round trips and pgbench set the pace."""
    p = f.profile
    if p is None or p.sessions < MIN_ACTIVE_SAMPLES or p.idle_share is None:
        return None
    if p.idle_share < IDLE_SHARE:
        return None
    return 1.0, Verdict(
        "load generator",
        f"the sessions waited for pgbench {p.idle_share:.0%} of the time (idle between "
        "statements): round trips and pgbench's own work, not the server, set the pace",
        {"session_idle_share": round(p.idle_share, 3)},
        "sessions idle >= 50% of the time",
    )


RULES = (
    Rule("load generator thread", DECISIVE, _load_generator_thread),
    Rule("working-set regime", DECISIVE, _regime),
    Rule("storage latency", WEIGHED, _storage_latency),
    Rule("synchronous replication", WEIGHED, _synchronous_replication),
    Rule("lock contention", WEIGHED, _lock_contention),
    Rule("storage throughput", WEIGHED, _storage_throughput),
    Rule("server CPU", WEIGHED, _server_cpu),
    Rule("network", FALLBACK, _network),
    Rule("idle sessions", FALLBACK, _idle_sessions),
)


def decide(f: StepFacts) -> Verdict:
    """The rules of docs/why.md, in their order (RULES)."""
    held: list[Weighed] = []
    for rule in RULES:
        if rule.stage == FALLBACK and held:
            break
        found = rule.check(f)
        if found is None:
            continue
        if rule.stage != WEIGHED:
            return found[1]
        held.append(found)
    if not held:
        return Verdict("unclear", _unclear(f), {}, "no rule held")
    held.sort(key=lambda c: -c[0])  # stable: of equal weights, the earlier rule
    best = held[0][1]
    best.also = [v.verdict for _, v in held[1:]] + (["network"] if f.network else [])
    return best


def _unclear(f: StepFacts) -> str:
    p = f.profile
    if p is None:
        return "no wait events were sampled, and no other rule's figures point at one resource"
    if p.active < MIN_ACTIVE_SAMPLES:
        return f"too few active-session samples ({p.active}) to tell what the sessions waited for"
    busy = f" ; the cores were {f.machine_busy_pct:.0f}% busy" if f.machine_busy_pct else ""
    return f"no resource dominates: {describe_top(p)}{busy}".replace(" ;", ";")


def step_facts(
    step: StepRecord,
    before: Sequence[StepRecord],
    target_settings: Mapping[str, str] | None = None,
) -> StepFacts:
    """The facts the rules read, from a derived step and the target's earlier steps."""
    params, m = step.all_params, step.metrics
    postgres = step.sections.get("postgres") or {}
    settings = {**(target_settings or {})}
    if isinstance(postgres.get("settings"), Mapping):
        settings.update({str(k): str(v) for k, v in postgres["settings"].items()})
    step_settings = params.get("settings")
    if isinstance(step_settings, Mapping):
        settings.update({str(k): str(v) for k, v in step_settings.items()})
    flushes_off = None
    for name in ("fsync", "synchronous_commit"):
        if str(settings.get(name, "")).lower() in ("off", "false", "0"):
            flushes_off = f"{name}={settings[name]}"
    busy = [_num(m.get(f"cpu_{k}_pct")) for k in ("user", "system", "steal")]
    level = sync_level(settings) or "flush"
    facts = StepFacts(
        sync_lag=level,
        sync_lag_p50_ms=_num(m.get(f"replication_{level}_lag_p50_ms")),
        mode=str(params["mode"]) if params.get("mode") else None,
        clients=int(params["clients"]) if isinstance(params.get("clients"), int) else None,
        scale=int(params["scale"]) if isinstance(params.get("scale"), int) else None,
        tps=_num(m.get("tps")),
        profile=wait_profile(postgres) if isinstance(postgres, Mapping) else None,
        pgbench_thread_pct=_num(m.get("pgbench_thread_cpu_max_pct")),
        pgbench_threads=_int(params.get("jobs")),
        machine_busy_pct=sum(b for b in busy if b is not None) if busy[0] is not None else None,
        flushes_off=flushes_off,
        network=network_reason(params, m),
        client_rtt_p50_ms=_num(m.get("client_rtt_p50_ms")),
    )
    ceiling = commit_ceiling(before)
    if ceiling is not None:
        facts.ceiling_tps, facts.flush_ms = ceiling.ceiling_tps, ceiling.flush_ms
    probe_iops = [
        e.probe_iops for s in before if (e := evidence_of(s)) and e.probe_iops is not None
    ]
    facts.probe_max_iops = max(probe_iops) if probe_iops and max(probe_iops) > 0 else None
    for role in ("data", "wal"):
        fig = {
            k: v
            for k in ("util_pct", "queue_depth", "read_iops", "write_iops")
            if (v := _num(m.get(f"io_{role}_{k}"))) is not None
        }
        # The server's own IOPS where its cgroup counted them: on a shared disk the device's
        # are everyone's, and a test that did no I/O is not limited by the disk.
        own = [_num(m.get(f"pg_io_{role}_{d}_iops")) for d in ("read", "write")]
        if fig and any(v is not None for v in own):
            fig["read_iops"], fig["write_iops"] = own[0] or 0.0, own[1] or 0.0
            fig["own"] = 1.0
        if fig:
            facts.device[role] = fig
    load = latest_load(before)
    if load is not None and load.status == "completed" and not params.get("warmup"):
        size = load.metrics.get("db_size_bytes")
        dataset = params.get("dataset")
        problems = regime_warnings(
            str(dataset) if dataset is not None else None,
            size if isinstance(size, int) else None,
            step.metrics,
            step.sections,
        )
        if problems:
            facts.regime_problem = problems[0].split(". ")[0].split(": the data")[0]
    return facts


def sentence(target: str, params: Mapping[str, JSONValue], why: Mapping[str, Any]) -> str:
    """'On /mnt/a, tpcb-like at 8 clients is limited by WAL flush latency: ...'"""
    mode = params.get("mode") or "pgbench"
    clients = params.get("clients")
    who = f"{mode} at {clients} client{'s' if clients != 1 else ''}" if clients else str(mode)
    verdict = str(why.get("verdict"))
    reason = str(why.get("verdict_reason") or "")
    if verdict == "unclear":
        return f"On {target}, {who} is not clearly limited by one resource: {reason}"
    return f"On {target}, {who} is limited by {LIMITED_BY.get(verdict, verdict)}: {reason}"


# -- one line per test, for the reports ----------------------------------------------------


@dataclass(frozen=True)
class WhyLine:
    """What limited one test (a mode at a client count) on one target of a run: the verdict
    its repetitions gave most often, with the sentence of the first of them."""

    run_id: int
    target: str
    mode: str
    clients: int | None
    rate: float | None
    verdict: str
    sentence: str
    verdicts: dict[str, int]  # verdict -> repetitions that gave it
    wait_types: dict[str, float]  # wait event type -> mean share over the repetitions

    @property
    def label(self) -> str:
        who = f"{self.mode}, {self.clients} clients" if self.clients else self.mode
        return who + (f", {self.rate:g} tx/s" if self.rate else "")

    @property
    def split(self) -> bool:
        return len(self.verdicts) > 1


def why_lines(run: RunRecord, target_title: Mapping[str, str] | None = None) -> list[WhyLine]:
    """One WhyLine per test of a derived run whose steps have a `why` section (pgbench's), in
    the order the tests ran."""
    groups: dict[tuple[str, str, object, object], list[StepRecord]] = {}
    for step in run.steps:
        why = step.sections.get("why")
        if not isinstance(why, Mapping):  # a step whose workload says what limited it
            continue
        p = step.all_params
        key = (step.target, str(p.get("mode")), p.get("clients"), p.get("rate"))
        groups.setdefault(key, []).append(step)
    lines = []
    for (target, mode, clients, rate), steps in groups.items():
        verdicts: dict[str, int] = {}
        for s in steps:
            v = str(s.sections["why"].get("verdict"))
            verdicts[v] = verdicts.get(v, 0) + 1
        top = max(verdicts.items(), key=lambda kv: kv[1])[0]
        first = next(s for s in steps if s.sections["why"].get("verdict") == top)
        title = (target_title or {}).get(target, target)
        text = sentence(title, first.all_params, first.sections["why"])
        if len(verdicts) > 1:
            text += (
                " (repetitions disagree: "
                + ", ".join(f"{v} {n}x" for v, n in sorted(verdicts.items(), key=lambda kv: -kv[1]))
                + ")"
            )
        types: dict[str, float] = {}
        sampled = 0
        for s in steps:
            postgres = s.sections.get("postgres") or {}
            rows = postgres.get("wait_event_types") if isinstance(postgres, Mapping) else None
            if isinstance(rows, list) and rows:
                sampled += 1
                for row in rows:
                    if isinstance(row, Mapping) and isinstance(row.get("share"), int | float):
                        name = str(row.get("wait_event_type"))
                        types[name] = types.get(name, 0.0) + float(row["share"])
        lines.append(
            WhyLine(
                run_id=run.id,
                target=target,
                mode=mode,
                clients=clients if isinstance(clients, int) else None,
                rate=float(rate) if isinstance(rate, int | float) else None,
                verdict=top,
                sentence=text,
                verdicts=verdicts,
                wait_types={k: v / sampled for k, v in types.items()} if sampled else {},
            )
        )
    return lines
