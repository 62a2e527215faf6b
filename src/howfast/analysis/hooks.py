"""What a workload adds when a run is read: its part of the derivation (analysis/derive.py) and
what its steps say about the storage, declared by its plugin as `analysis = "module:attribute"`
(plugin/workload.py) and imported here, so that analysis names no workload. A workload without
one reads as stored and says nothing of the storage.

Derivation returns new records: a hook says what it adds (`Derived`), `apply` makes the new
step.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from howfast.model import JSONValue, StepRecord
from howfast.plugin import registry
from howfast.plugin.loading import load


@dataclass(frozen=True)
class Derived:
    """What a hook adds to one step. Its metrics join the step's (the tool's own figures win);
    a step stored with frozen figures (legacy) gives up the `owned` names first. Its warnings
    follow the step's (each text once); its sections replace the step's of the same name."""

    metrics: Mapping[str, JSONValue] = field(default_factory=dict)
    owned: frozenset[str] = frozenset()
    warnings: tuple[str, ...] = ()
    sections: Mapping[str, Mapping[str, JSONValue]] = field(default_factory=dict)

    def then(self, later: Derived) -> Derived:
        """This, then `later`, as one (their owned names are apart: the parts of one
        workload's derivation own different figures)."""
        return Derived(
            metrics={**later.metrics, **self.metrics},  # the first to add a figure keeps it
            owned=self.owned | later.owned,
            warnings=self.warnings + later.warnings,
            sections={**self.sections, **later.sections},
        )


NOTHING_DERIVED = Derived()


def apply(step: StepRecord, derived: Derived | None) -> StepRecord:
    """A new step with what `derived` adds; None adds nothing (the rule could not be applied,
    so a legacy step keeps what it stored)."""
    if derived is None or derived == NOTHING_DERIVED:
        return step
    metrics = dict(step.metrics)
    if step.legacy:  # frozen figures give way to today's, or go when today's rules say none
        for key in derived.owned:
            metrics.pop(key, None)
    for key, value in derived.metrics.items():
        metrics.setdefault(key, value)
    warnings = list(step.warnings)
    warnings += [w for w in dict.fromkeys(derived.warnings) if w not in warnings]
    sections: dict[str, Any] = dict(step.sections)
    sections.update({name: copy.deepcopy(dict(s)) for name, s in derived.sections.items()})
    return replace(step, metrics=metrics, warnings=warnings, sections=sections)


@dataclass(frozen=True)
class DeriveContext:
    imported: bool = False  # the step came from `howfast import`: its params are the tool's
    target_settings: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Evidence:
    """What one completed step says about the storage and the commit path, for the
    commit-rate ceiling (analysis/probe.py) and the `why` rules (analysis/why.py), whatever
    workload measured it."""

    # It timed a flush after each write (a sync latency): fio's wal-fsync profile, or any job
    # that synced its writes. flush_ms = write_ms + sync_ms, as one WAL flush costs.
    times_flushes: bool = False
    flush_ms: float | None = None
    write_ms: float | None = None
    sync_ms: float | None = None
    preferred_flush: bool = False  # the probe made for it (fio's wal-fsync profile)
    # A flush after every write, as a WAL commit makes: what durability compares (the flush
    # a volume gives), named by what measured it ("fio wal-fsync"); None: not such a step
    flush_source: str | None = None
    fsync_ops_s: float | None = None  # fdatasync calls per second (pg_test_fsync)
    # One 8 kB write then sync, per wal_sync_method, in µs, named by what measured them
    # ("pg_test_fsync"): durability's flush time of the method in use, advice's best method
    sync_method_us: Mapping[str, float] = field(default_factory=dict)
    sync_source: str | None = None
    # The most IOPS the storage gave a throughput probe (several I/Os in flight, no flush)
    probe_iops: float | None = None
    # One connection committing as fast as it can (pgbench tpcb-like at 1 client)
    commit_tps: float | None = None
    commit_latency_ms: float | None = None


class WorkloadAnalysis:
    """A workload's part of reading a run. The defaults add nothing."""

    def derive_step(
        self, step: StepRecord, before: Sequence[StepRecord], ctx: DeriveContext
    ) -> Derived:
        """What the step's own data says; `step` has the generic derivation already (I/O,
        CPU, wait profile); `before`: the target's earlier steps, derived."""
        return NOTHING_DERIVED

    def derive_run(self, steps: Sequence[StepRecord]) -> Mapping[int, Derived]:
        """What its steps of a whole run say together (a rate curve's knee), by position in
        `steps`: the run's steps of this workload, derived, every target's."""
        return {}

    def series_needed(self, step: StepRecord) -> frozenset[str]:
        """The per-second series its derivation of `step` reads."""
        return frozenset()

    def evidence(self, step: StepRecord) -> Evidence | None:
        """What the step says about the storage and the commit path; None: nothing."""
        return None

    def verdict_label(self, step: StepRecord) -> str:
        """How verdicts and advice name the step's test ('tpcb-like at 4 clients')."""
        return step.workload


NOTHING = WorkloadAnalysis()


def analysis_for(workload: str) -> WorkloadAnalysis:
    """The analysis part of `workload`'s plugin; one that adds nothing for a workload that
    declares none or that this howfast does not know (an old run's)."""
    plugin = registry.find(workload)
    if plugin is None or plugin.analysis is None:
        return NOTHING
    found = load(plugin.analysis)
    if not isinstance(found, WorkloadAnalysis):
        raise TypeError(f"{plugin.analysis} is not a WorkloadAnalysis")
    return found


def evidence_of(step: StepRecord) -> Evidence | None:
    """What `step` says about the storage, by its workload's analysis part."""
    return analysis_for(step.workload).evidence(step)


def verdict_label(step: StepRecord) -> str:
    """How verdicts name `step`'s test, by its workload's analysis part."""
    return analysis_for(step.workload).verdict_label(step)
