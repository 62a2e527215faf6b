"""The per-target summary that ends a run: one table per pgbench mode, like the published
studies (clients | TPS | avg latency | p99 latency | connection time), plus the load step
and the storage probe (fio, pg_test_fsync and the commit-rate ceiling, see analysis/probe.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from howfast.analysis.probe import PROBE_WORKLOADS, ProbeSummary, probe_summary
from howfast.model import JSONValue, RunRecord, StepRecord


@dataclass(frozen=True)
class ModeRow:
    clients: int | None
    repetition: int | None
    status: str
    tps: float | None
    latency_avg_ms: float | None
    latency_p99_ms: float | None
    conn_time_ms: float | None
    warnings: int


@dataclass
class TargetSummary:
    name: str
    kind: str
    pg_version: str | None
    storage: str | None
    init: list[StepRecord] = field(default_factory=list)
    modes: dict[str, list[ModeRow]] = field(default_factory=dict)
    other: list[StepRecord] = field(default_factory=list)
    probe: ProbeSummary | None = None


def _num(metrics: dict[str, JSONValue], key: str) -> float | None:
    value = metrics.get(key)
    return float(value) if isinstance(value, int | float) else None


def storage_summary(device: dict[str, JSONValue]) -> str | None:
    """'ext4 on vda (rotational)' from the recorded device facts."""
    data = device.get("data")
    if not isinstance(data, dict):
        note = device.get("note")
        return str(note) if note else None
    dev = data.get("device") if isinstance(data.get("device"), dict) else {}
    assert isinstance(dev, dict)
    text = f"{data.get('fstype', '?')} on {dev.get('name') or data.get('source', '?')}"
    if dev.get("rotational") is True:
        text += " (rotational)"
    if device.get("wal_on_data_device") is False:
        wal = device.get("wal")
        if isinstance(wal, dict):
            text += f", WAL on {wal.get('fstype', '?')} {wal.get('path', '')}"
    return text


def summarize(run: RunRecord) -> list[TargetSummary]:
    summaries: dict[str, TargetSummary] = {}
    settings = {t.name: t.settings for t in run.targets}
    for target in run.targets:
        summaries[target.name] = TargetSummary(
            target.name, target.kind, target.pg_version, storage_summary(target.device)
        )
    for step in run.steps:
        summary = summaries.setdefault(step.target, TargetSummary(step.target, "?", None, None))
        if step.workload == "pgbench-init":
            summary.init.append(step)
        elif step.workload == "pgbench":
            mode = str(step.params.get("mode", "?"))
            clients = step.params.get("clients")
            rep = step.params.get("repetition")
            summary.modes.setdefault(mode, []).append(
                ModeRow(
                    clients=int(clients) if isinstance(clients, int) else None,
                    repetition=int(rep) if isinstance(rep, int) else None,
                    status=step.status,
                    tps=_num(step.metrics, "tps"),
                    latency_avg_ms=_num(step.metrics, "latency_avg_ms"),
                    latency_p99_ms=_num(step.metrics, "latency_p99_ms"),
                    conn_time_ms=_num(step.metrics, "conn_time_ms"),
                    warnings=len(step.warnings),
                )
            )
        elif step.workload not in PROBE_WORKLOADS:
            summary.other.append(step)
    for summary in summaries.values():
        own = [s for s in run.steps if s.target == summary.name]
        summary.probe = probe_summary(own, settings.get(summary.name))
    return list(summaries.values())
