"""The per-target summary that ends a run: one table per pgbench mode, like the published
studies (clients | TPS | avg latency | p99 latency | connection time), plus the load step
and the storage probe (fio, pg_test_fsync and the commit-rate ceiling, see analysis/probe.py).

With repetitions, the same tests are also gathered into groups with their statistics (mean,
confidence interval, coefficient of variation, see analysis/groups.py); warm-up steps are kept
apart and never counted."""

from __future__ import annotations

from dataclasses import dataclass, field

from howfast.analysis.groups import StepGroup, group_steps, is_warmup
from howfast.analysis.probe import PROBE_WORKLOADS, ProbeSummary, probe_summary
from howfast.analysis.steady import steady_state
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
    # From the per-second series when they were read (analysis/steady.py)
    steady_tps: float | None = None
    steady_skipped_s: float | None = None


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
    warmups: list[StepRecord] = field(default_factory=list)
    # The same tests gathered over their repetitions: pgbench by mode, and fio profiles
    groups: dict[str, list[StepGroup]] = field(default_factory=dict)
    fio_groups: list[StepGroup] = field(default_factory=list)

    @property
    def repeated(self) -> bool:
        """Whether any pgbench test ran more than once: then the tables show spread."""
        return any(len(g.steps) > 1 for groups in self.groups.values() for g in groups)

    @property
    def fio_repeated(self) -> bool:
        return any(len(g.steps) > 1 for g in self.fio_groups)


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
        if is_warmup(step):
            summary.warmups.append(step)
        elif step.workload == "pgbench-init":
            summary.init.append(step)
        elif step.workload == "pgbench":
            mode = str(step.all_params.get("mode", "?"))
            clients = step.all_params.get("clients")
            rep = step.all_params.get("repetition")
            steady = steady_state(step.series) if step.status == "completed" else None
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
                    steady_tps=steady.tps if steady else None,
                    steady_skipped_s=steady.skipped_s if steady else None,
                )
            )
        elif step.workload not in PROBE_WORKLOADS:
            summary.other.append(step)
    for summary in summaries.values():
        own = [s for s in run.steps if s.target == summary.name]
        summary.probe = probe_summary(own, settings.get(summary.name))
    for group in group_steps(run):
        summary = summaries[group.target]
        if group.workload == "pgbench":
            mode = str(group.params.get("mode", "?"))
            summary.groups.setdefault(mode, []).append(group)
        elif group.workload == "fio":
            summary.fio_groups.append(group)
    return list(summaries.values())
