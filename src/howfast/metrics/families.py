"""The metric families howfast exposes, in one registry of its own (never the client library's
global one), and how a step's events and its finished record set them.

Names follow Prometheus's conventions: the `howfast_` prefix, base units (seconds, bytes,
ratios 0-1 rather than percentages), `_total` for counters. Every step-level series carries
STEP_LABELS; docs/prometheus.md lists every family and what it means.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

from howfast.analysis.events import step_figures
from howfast.model import JSONValue, Sample, StepRecord
from howfast.plugin.registry import find, plugins
from howfast.plugin.workload import StepFamily
from howfast.units import plain_number

PREFIX = "howfast_"
RUN_LABELS = ("run_id", "plan")
# `class` is a fleet's QoS class (empty until fleets exist); `step` (1-based, over the run)
# keeps repetitions and rate sweeps of the same mode and clients apart.
STEP_LABELS = ("run_id", "plan", "target", "workload", "mode", "clients", "class", "step")
STEP_STATES = ("running", "completed", "failed", "skipped")
# Per-second pgbench latency averages: 50 µs to 10 s.
LATENCY_BUCKETS = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
# pgbench's exact percentiles (from the per-transaction log) -> the `quantile` label.
QUANTILES = {
    "latency_p50_ms": "0.5",
    "latency_p90_ms": "0.9",
    "latency_p95_ms": "0.95",
    "latency_p99_ms": "0.99",
    "latency_p999_ms": "0.999",
    "latency_max_ms": "1",
}
CPU_MODES = ("user", "system", "iowait", "steal")
ROLES = ("data", "wal")


@dataclass(frozen=True)
class StepLabels:
    """The label values of one step."""

    run_id: str
    plan: str
    target: str
    workload: str
    mode: str
    clients: str
    klass: str  # `class` is a Python keyword
    step: str

    def values(self) -> tuple[str, ...]:
        return (
            self.run_id,
            self.plan,
            self.target,
            self.workload,
            self.mode,
            self.clients,
            self.klass,
            self.step,
        )


def step_labels(
    run_id: int | str,
    plan: str,
    target: str,
    workload: str,
    params: Mapping[str, JSONValue],
    index: int,
) -> StepLabels:
    """Labels of a step: `mode` and `clients` as its workload says (`prometheus_labels`:
    pgbench's mode and client count, fio's profile), empty for workloads that have none;
    `class` a fleet instance's. `index` is 0-based."""
    plugin = find(workload)
    mode, clients = plugin.prometheus_labels(params) if plugin is not None else ("", "")
    klass = params.get("class") or ""
    return StepLabels(
        str(run_id), plan, target, workload, mode, clients, str(klass), str(index + 1)
    )


def metric_name(*parts: str) -> str:
    """`howfast_` + the parts joined by `_`, with anything outside [a-zA-Z0-9_] replaced:
    metric_name("step", "disk", "written_bytes") == "howfast_step_disk_written_bytes"."""
    joined = "_".join(p.strip("_") for p in parts if p)
    clean = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in joined)
    return PREFIX + clean


def _number(value: JSONValue) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def epoch(iso: str) -> float | None:
    """Seconds since the epoch of a stored time stamp (ISO 8601 with offset)."""
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None


Metric = Gauge | Counter | Histogram


@dataclass(frozen=True)
class Family:
    """A family of RunMetrics, declared: the attribute that holds it, its kind, its name
    after `howfast_`, its help and labels (and a histogram's buckets)."""

    attribute: str
    kind: type[Metric]
    name: str
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] | None = None

    def build(self, registry: CollectorRegistry) -> Metric:
        if self.buckets is not None:
            return Histogram(
                metric_name(self.name),
                self.help,
                self.labels,
                buckets=self.buckets,
                registry=registry,
            )
        return self.kind(metric_name(self.name), self.help, self.labels, registry=registry)


# The families of the run and its steps, registered (and exposed) in this order; then those
# each workload declares of its finished steps (fio's IOPS and bytes); then SAMPLED_FAMILIES.
FAMILIES = (
    Family("run_info", Gauge, "run_info", "A howfast run (always 1).", RUN_LABELS),
    Family(
        "run_start",
        Gauge,
        "run_start_time_seconds",
        "When the run started, seconds since the epoch.",
        RUN_LABELS,
    ),
    Family(
        "run_end",
        Gauge,
        "run_end_time_seconds",
        "When the run finished, seconds since the epoch (only once it has).",
        RUN_LABELS,
    ),
    Family("run_steps", Gauge, "run_steps", "Steps in the run, all targets.", RUN_LABELS),
    Family(
        "run_steps_finished",
        Counter,
        "run_steps_finished",
        "Steps finished so far, by status.",
        (*RUN_LABELS, "status"),
    ),
    Family(
        "run_progress",
        Gauge,
        "run_progress_ratio",
        "Share of the run's steps finished, 0 to 1.",
        RUN_LABELS,
    ),
    Family(
        "step_state",
        Gauge,
        "step_state",
        "1 for the step's current state, 0 for the others.",
        (*STEP_LABELS, "state"),
    ),
    Family(
        "step_expected",
        Gauge,
        "step_expected_duration_seconds",
        "How long the step is planned to run (pgbench's duration, fio's runtime).",
        STEP_LABELS,
    ),
    Family(
        "step_elapsed",
        Gauge,
        "step_elapsed_seconds",
        "Seconds since the step started, at its last progress report.",
        STEP_LABELS,
    ),
    Family(
        "tps",
        Gauge,
        "tps",
        "pgbench's transactions per second over its last progress interval (1 s); "
        "only while the step runs.",
        STEP_LABELS,
    ),
    Family(
        "latency",
        Histogram,
        "latency_seconds",
        "pgbench's average transaction latency of each progress interval (1 s): one "
        "observation per second, not per transaction.",
        STEP_LABELS,
        buckets=LATENCY_BUCKETS,
    ),
    Family(
        "transactions",
        Counter,
        "transactions",
        "Transactions pgbench completed (per progress interval; exact at the step's end).",
        STEP_LABELS,
    ),
    Family(
        "failures",
        Counter,
        "failed_transactions",
        "Transactions pgbench counted as failed (serialization or deadlock errors).",
        STEP_LABELS,
    ),
    Family(
        "step_duration",
        Gauge,
        "step_duration_seconds",
        "How long the finished step took, from its start to its end.",
        STEP_LABELS,
    ),
    Family(
        "step_end",
        Gauge,
        "step_end_time_seconds",
        "When the step finished, seconds since the epoch.",
        STEP_LABELS,
    ),
    Family(
        "step_tps",
        Gauge,
        "step_tps",
        "pgbench's TPS over the whole finished step (without connection time).",
        STEP_LABELS,
    ),
    Family(
        "step_latency_avg",
        Gauge,
        "step_latency_average_seconds",
        "pgbench's average transaction latency over the finished step.",
        STEP_LABELS,
    ),
    Family(
        "step_latency",
        Gauge,
        "step_latency_seconds",
        "Exact latency percentiles of the finished step, from pgbench's per-transaction "
        "log (quantile 1 is the maximum).",
        (*STEP_LABELS, "quantile"),
    ),
)
# What the samplers saw of a finished step.
SAMPLED_FAMILIES = (
    Family(
        "disk_ops",
        Gauge,
        "step_disk_operations_per_second",
        "Requests the device behind a role completed per second over the finished step "
        "(/proc/diskstats).",
        (*STEP_LABELS, "role", "op"),
    ),
    Family(
        "disk_rate",
        Gauge,
        "step_disk_bytes_per_second",
        "Bytes per second the device behind a role read or wrote over the finished step.",
        (*STEP_LABELS, "role", "op"),
    ),
    Family(
        "disk_bytes",
        Gauge,
        "step_disk_bytes",
        "Bytes the device behind a role read or wrote during the finished step.",
        (*STEP_LABELS, "role", "op"),
    ),
    Family(
        "cpu",
        Gauge,
        "step_cpu_ratio",
        "Share of all CPUs' time in a mode over the finished step, 0 to 1.",
        (*STEP_LABELS, "cpu_mode"),
    ),
    Family(
        "wait_events",
        Gauge,
        "step_wait_event_ratio",
        "Share of sampled active sessions in each wait event over the finished step "
        "(wait_event_type CPU: active without a wait event).",
        (*STEP_LABELS, "wait_event_type", "wait_event"),
    ),
    Family(
        "role_device",
        Gauge,
        "role_device_info",
        "The block device behind a target's storage role (1): join node_exporter's "
        "node_disk_* series on `device`.",
        (*RUN_LABELS, "target", "role", "device"),
    ),
    Family(
        "checkpoint_start",
        Gauge,
        "checkpoint_start_time_seconds",
        "When a checkpoint seen during the step started, seconds since the epoch.",
        (*STEP_LABELS, "checkpoint"),
    ),
    Family(
        "checkpoint_end",
        Gauge,
        "checkpoint_end_time_seconds",
        "When a checkpoint seen during the step ended, seconds since the epoch.",
        (*STEP_LABELS, "checkpoint"),
    ),
    Family(
        "checkpoints",
        Counter,
        "checkpoints",
        "Checkpoints that ran during the run's steps (counted when each step ends).",
        STEP_LABELS,
    ),
)


class RunMetrics:
    """Every family, registered in a registry of its own."""

    run_info: Gauge
    run_start: Gauge
    run_end: Gauge
    run_steps: Gauge
    run_steps_finished: Counter
    run_progress: Gauge
    step_state: Gauge
    step_expected: Gauge
    step_elapsed: Gauge
    tps: Gauge
    latency: Histogram
    transactions: Counter
    failures: Counter
    step_duration: Gauge
    step_end: Gauge
    step_tps: Gauge
    step_latency_avg: Gauge
    step_latency: Gauge
    disk_ops: Gauge
    disk_rate: Gauge
    disk_bytes: Gauge
    cpu: Gauge
    wait_events: Gauge
    role_device: Gauge
    checkpoint_start: Gauge
    checkpoint_end: Gauge
    checkpoints: Counter

    def __init__(self) -> None:
        # No `_created` series beside each counter: they double the exposition and no
        # dashboard of howfast's reads them (a process-wide switch of the client library).
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        for family in FAMILIES:
            setattr(self, family.attribute, family.build(self.registry))
        self.workload_families: dict[str, list[tuple[StepFamily, Gauge]]] = {}
        for name, plugin in plugins().items():
            self.workload_families[name] = [
                (
                    f,
                    Gauge(
                        metric_name(f.name),
                        f.help,
                        (*STEP_LABELS, *([f.label] if f.label else [])),
                        registry=self.registry,
                    ),
                )
                for f in plugin.prometheus
            ]
        for family in SAMPLED_FAMILIES:
            setattr(self, family.attribute, family.build(self.registry))
        # issue 29: events during steps, registered with the first step that had some (a run
        # without events exposes no empty families of them)
        self._event_families: EventFamilies | None = None
        self._labels = STEP_LABELS

    # --- run ------------------------------------------------------------------------------

    def run_started(self, run_id: str, plan: str, steps: int, started: float) -> None:
        self.run_info.labels(run_id, plan).set(1)
        self.run_start.labels(run_id, plan).set(started)
        self.run_steps.labels(run_id, plan).set(steps)
        self.run_progress.labels(run_id, plan).set(0)

    def run_finished(self, run_id: str, plan: str, finished: float) -> None:
        self.run_end.labels(run_id, plan).set(finished)

    # --- live step events -----------------------------------------------------------------

    def step_started(self, labels: StepLabels, expected_s: float | None) -> None:
        self.set_state(labels, "running")
        if expected_s:
            self.step_expected.labels(*labels.values()).set(expected_s)
        plugin = find(labels.workload)
        if plugin is not None and plugin.counts_transactions:
            # Counters exist from 0 as the step starts, so that rate() over the step has
            # samples from its beginning, not only from the step's end (a failure-free step).
            self.transactions.labels(*labels.values())
            self.failures.labels(*labels.values())

    def step_progress(self, labels: StepLabels, t: float, values: Mapping[str, float]) -> float:
        """One progress report; returns the transactions it counted (tps x interval)."""
        v = labels.values()
        self.step_elapsed.labels(*v).set(t)
        counted = 0.0
        tps = values.get("tps")
        if tps is not None and math.isfinite(tps):
            self.tps.labels(*v).set(tps)
            counted = max(0.0, tps)  # pgbench's progress interval is 1 s
            self.transactions.labels(*v).inc(counted)
            latency_ms = values.get("latency_ms")
            if latency_ms is not None and math.isfinite(latency_ms) and tps > 0:
                self.latency.labels(*v).observe(latency_ms / 1000)
        failed = values.get("failed")
        if failed is not None and math.isfinite(failed) and failed > 0:
            self.failures.labels(*v).inc(failed)
        return counted

    def set_state(self, labels: StepLabels, state: str) -> None:
        for name in STEP_STATES:
            self.step_state.labels(*labels.values(), name).set(1 if name == state else 0)

    def end_live(self, labels: StepLabels) -> None:
        """A finished step's per-second gauges go away: Prometheus marks them stale instead
        of scraping the last second's TPS until the run ends."""
        for gauge in (self.tps, self.step_elapsed):
            with contextlib.suppress(KeyError):
                gauge.remove(*labels.values())

    # --- a finished step ------------------------------------------------------------------

    def step_finished(
        self,
        labels: StepLabels,
        record: StepRecord,
        *,
        counted_transactions: float = 0.0,
        counted_failures: float = 0.0,
    ) -> None:
        """Everything the finished record says. The counters are topped up to the step's
        exact totals from what the progress reports already counted."""
        v = labels.values()
        self.set_state(labels, record.status)
        self.end_live(labels)
        m = record.metrics
        started, finished = epoch(record.started_at), epoch(record.finished_at)
        if finished is not None:
            self.step_end.labels(*v).set(finished)
            if started is not None:
                self.step_duration.labels(*v).set(round(max(0.0, finished - started), 3))
        transactions = _number(m.get("transactions"))
        if transactions is not None:
            self.transactions.labels(*v).inc(max(0.0, transactions - counted_transactions))
        failed = _number(m.get("failed"))
        if failed is not None:
            self.failures.labels(*v).inc(max(0.0, failed - counted_failures))
        tps = _number(m.get("tps"))
        if tps is not None:
            self.step_tps.labels(*v).set(tps)
        avg = _number(m.get("latency_avg_ms"))
        if avg is not None:
            self.step_latency_avg.labels(*v).set(avg / 1000)
        for key, quantile in QUANTILES.items():
            value = _number(m.get(key))
            if value is not None:
                self.step_latency.labels(*v, quantile).set(value / 1000)
        for family, gauge in self.workload_families.get(record.workload, []):
            for label, value in family.values(m):
                if value is not None:
                    gauge.labels(*v, *([label] if family.label else [])).set(value)
        self._sampled(labels, record)
        self._events(labels, record)

    def _events(self, labels: StepLabels, record: StepRecord) -> None:
        v = labels.values()
        found = step_figures(record.sections, record.histograms)
        if not found:
            return
        if self._event_families is None:
            self._event_families = EventFamilies(self.registry, self._labels)
        families = self._event_families
        for fig in found:
            mark = fig.mark
            outcome = (
                "skipped"
                if mark.skipped
                else "failed"
                if mark.error
                else "not verified"
                if mark.verified is False
                else "applied"
            )
            families.events.labels(*v, mark.action, outcome).inc()
            at = f"{plain_number(mark.at_s)}s"
            for gauge, value in (
                (families.downtime, fig.downtime_s),
                (families.recovery, fig.recovery_s),
                (families.failed, float(fig.failed_transactions) if not mark.skipped else None),
                (families.lost, float(fig.lost.lost) if fig.lost is not None else None),
            ):
                if value is not None:
                    gauge.labels(*v, mark.action, at).set(value)

    def _sampled(self, labels: StepLabels, record: StepRecord) -> None:
        v = labels.values()
        m = record.metrics
        for role in ROLES:
            for op, key in (("read", "read"), ("write", "write")):
                iops = _number(m.get(f"io_{role}_{key}_iops"))
                mbps = _number(m.get(f"io_{role}_{key}_mbps"))
                total = _number(m.get(f"io_{role}_{key}_bytes"))
                if iops is not None:
                    self.disk_ops.labels(*v, role, op).set(iops)
                if mbps is not None:
                    self.disk_rate.labels(*v, role, op).set(mbps * 1e6)
                if total is not None:
                    self.disk_bytes.labels(*v, role, op).set(total)
        for mode in CPU_MODES:
            pct = _number(m.get(f"cpu_{mode}_pct"))
            if pct is not None:
                self.cpu.labels(*v, mode).set(pct / 100)
        for wait_type, event, share in wait_event_shares(record):
            self.wait_events.labels(*v, wait_type, event).set(share)
        for role, device in role_devices(record):
            self.role_device.labels(labels.run_id, labels.plan, labels.target, role, device).set(1)
        checkpoints = _number(m.get("checkpoints"))
        if checkpoints is not None and checkpoints > 0:
            self.checkpoints.labels(*v).inc(checkpoints)
        started = epoch(record.started_at)
        if started is not None:
            for n, (start_t, end_t) in enumerate(checkpoint_times(record), 1):
                self.checkpoint_start.labels(*v, str(n)).set(started + start_t)
                if end_t is not None:
                    self.checkpoint_end.labels(*v, str(n)).set(started + end_t)

    def replay_progress(
        self, labels: StepLabels, tps: Iterable[Sample], latency_ms: Iterable[Sample]
    ) -> None:
        """Feed the latency histogram from a stored step's per-second series, as the live
        progress reports fed it (an interval without transactions has no latency)."""
        rates = {p.t: p.value for p in tps}
        for p in latency_ms:
            if math.isfinite(p.value) and rates.get(p.t, 0.0) > 0:
                self.latency.labels(*labels.values()).observe(p.value / 1000)


class EventFamilies:
    """The families of events during steps (issue 29, docs/prometheus.md)."""

    def __init__(self, registry: CollectorRegistry, step_labels: Sequence[str]) -> None:
        self.events = Counter(
            metric_name("events"),
            "Events applied during the run's steps, by action and outcome (applied, not "
            "verified, failed, skipped).",
            (*step_labels, "action", "outcome"),
            registry=registry,
        )
        event_labels = (*step_labels, "action", "at")
        self.downtime = Gauge(
            metric_name("step_event_downtime_seconds"),
            "How long the service gave no commit around an event, from the last commit "
            "before to the first after.",
            event_labels,
            registry=registry,
        )
        self.recovery = Gauge(
            metric_name("step_event_recovery_seconds"),
            "From an event to TPS back at 90% of the 30 s before it (two seconds in a row).",
            event_labels,
            registry=registry,
        )
        self.failed = Gauge(
            metric_name("step_event_failed_transactions"),
            "Transactions an event made fail: pgbench's failed ones and one per client cut.",
            event_labels,
            registry=registry,
        )
        self.lost = Gauge(
            metric_name("step_event_lost_commits"),
            "Commits pgbench saw acknowledged that the surviving database does not hold "
            "(tpcb-like, simple-update).",
            event_labels,
            registry=registry,
        )


def role_devices(record: StepRecord) -> list[tuple[str, str]]:
    """(role, device) of the roles the disk sampler sampled (not those sharing a device)."""
    io = record.sections.get("io") or {}
    roles = io.get("roles") if isinstance(io, dict) else None
    out = []
    if isinstance(roles, dict):
        for role, info in roles.items():
            if isinstance(info, dict) and info.get("device") and not info.get("same_device_as"):
                out.append((str(role), str(info["device"])))
    return out


def checkpoint_times(record: StepRecord) -> list[tuple[float, float | None]]:
    """(start_t, end_t) of each checkpoint in the step's `postgres.checkpoints`, seconds since
    the step started (end_t None: still running when the step ended)."""
    postgres = record.sections.get("postgres") or {}
    events = postgres.get("checkpoints") if isinstance(postgres, dict) else None
    out: list[tuple[float, float | None]] = []
    for event in events if isinstance(events, list) else []:
        if not isinstance(event, dict):
            continue
        start = _number(event.get("start_t"))
        if start is not None:
            out.append((start, _number(event.get("end_t"))))
    return out


def wait_event_shares(record: StepRecord) -> list[tuple[str, str, float]]:
    """`postgres.wait_events` = [{"wait_event_type": "IO", "wait_event": "WALSync",
    "share": 0.42}, ...], derived from the wait-event sampler's counts (analysis/why.py)."""
    postgres = record.sections.get("postgres") or {}
    events = postgres.get("wait_events") if isinstance(postgres, dict) else None
    out = []
    for event in events if isinstance(events, list) else []:
        if not isinstance(event, dict):
            continue
        share = _number(event.get("share"))
        if share is not None:
            out.append(
                (str(event.get("wait_event_type") or ""), str(event.get("wait_event") or ""), share)
            )
    return out
