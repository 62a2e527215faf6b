"""The per-target summary that ends a run and that `results show` prints: each target's steps,
warm-ups (kept apart and never counted), tests gathered over their repetitions with their
statistics (mean, confidence interval, coefficient of variation, analysis/groups.py), and the
commit-rate ceiling of its storage (analysis/probe.py). What each workload shows of it is its
report part's (report/hooks.py): pgbench's table per mode, fio's and pg_test_fsync's probe
tables, pgbench-init's load line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from howfast.analysis.groups import StepGroup, group_steps, is_warmup
from howfast.analysis.probe import CommitCeiling, commit_ceiling
from howfast.model import JSONValue, RunRecord, StepRecord


@dataclass(frozen=True)
class TargetSummary:
    name: str
    kind: str
    pg_version: str | None
    storage: str | None
    steps: tuple[StepRecord, ...] = ()  # every step of the target, warm-ups too, in order
    groups: tuple[StepGroup, ...] = ()  # its tests over their repetitions, warm-ups left out
    ceiling: CommitCeiling | None = None

    @property
    def warmups(self) -> list[StepRecord]:
        return [s for s in self.steps if is_warmup(s)]

    def steps_of(self, workload: str) -> list[StepRecord]:
        """Its steps of `workload`, warm-ups left out."""
        return [s for s in self.steps if s.workload == workload and not is_warmup(s)]

    def groups_of(self, workload: str) -> list[StepGroup]:
        return [g for g in self.groups if g.workload == workload]


def storage_summary(device: Mapping[str, JSONValue]) -> str | None:
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
    """Each target of the run, in its order, then any target only its steps name."""
    records = {t.name: t for t in run.targets}
    names = list(dict.fromkeys([*records, *(s.target for s in run.steps)]))
    groups = group_steps(run)
    out = []
    for name in names:
        target = records.get(name)
        own = tuple(s for s in run.steps if s.target == name)
        out.append(
            TargetSummary(
                name,
                target.kind if target else "?",
                target.pg_version if target else None,
                storage_summary(target.device) if target else None,
                own,
                tuple(g for g in groups if g.target == name),
                commit_ceiling(own, target.settings if target else None),
            )
        )
    return out
