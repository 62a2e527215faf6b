"""Records that flow from the runner to the store and back out as the run document.

Values are plain JSON types so that every layer (store, JSON export, reports) can pass them on
without conversion. See docs/json.md for the contract.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

JSONValue = Any  # str | int | float | bool | None | list | dict, kept loose for mypy
RunStatus = Literal["running", "completed", "failed", "aborted"]
StepStatus = Literal["completed", "failed", "skipped"]
# The sampled sections docs/json.md promises in every step's document (null for a step that
# was not sampled). What the samplers declare (samplers/registry.step_sections) is given to
# `RunRecord.document` by who reads a run for output (service/reading.py), and adds a new
# sampler's section; tests/unit/test_declared_lists.py checks that the built-in samplers
# declare exactly these.
CONTRACT_SECTIONS = ("io", "cpu", "postgres")


@dataclass(frozen=True)
class StepSpec:
    """One step of an expanded plan, before it runs: which workload with which parameters."""

    workload: str
    params: dict[str, JSONValue]
    repetition: int = 1


@dataclass(frozen=True)
class Sample:
    """One point of a per-second series: seconds since the step started, and the value."""

    t: float
    value: float


@dataclass(frozen=True)
class StepRecord:
    """A finished step as it is stored: params, metrics, per-second series, warnings.

    `params` is what the plan asked (frozen before the step ran), `resolved` what was decided
    at run time (jobs, the rate a fraction came to, the scale loaded, direct I/O...);
    `all_params` is both, as the run document's `params` shows them. Metrics, warnings and
    sections hold what was measured and what happened; verdicts are derived when read
    (analysis/derive.py)."""

    target: str
    workload: str
    params: dict[str, JSONValue]
    status: StepStatus
    started_at: str
    finished_at: str
    metrics: dict[str, JSONValue] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    # series name -> points, e.g. "tps", "latency_ms", "lag_ms"
    series: dict[str, list[Sample]] = field(default_factory=dict)
    # histogram name -> {value: count}; exact latency histograms in microseconds
    histograms: dict[str, dict[int, int]] = field(default_factory=dict)
    id: int | None = None
    # What the samplers saw, by section ("io", "cpu", "postgres"); empty when not sampled
    sections: dict[str, dict[str, JSONValue]] = field(default_factory=dict)
    # Params resolved at run time; empty for steps stored before they were kept apart
    resolved: dict[str, JSONValue] = field(default_factory=dict)
    # Stored before schema 4, by a howfast that froze verdicts into metrics, warnings and
    # sections: the derivation replaces them when the step is read.
    legacy: bool = False

    @property
    def all_params(self) -> dict[str, JSONValue]:
        """What the step ran with: the asked params, with what was resolved at run time."""
        return {**self.params, **self.resolved}


@dataclass(frozen=True)
class TargetRecord:
    """Where PostgreSQL ran: its kind, version, effective settings and storage devices."""

    name: str
    kind: str
    pg_version: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    device: dict[str, JSONValue] = field(default_factory=dict)
    # A redacted connection string or the directory; never a password.
    location: str | None = None
    # The standbys howfast gave it (--replicas, docs/replication.md), in order: name,
    # location, port, version, sync_state, device, emulation
    standbys: tuple[dict[str, JSONValue], ...] = ()
    # Where the client (pgbench) ran and how it reached the server (--client): placement
    # ("socket", "tcp") and address; empty for targets without one and older runs
    client: dict[str, JSONValue] = field(default_factory=dict)
    # Derived when the run is read, never stored (analysis/derive.py): `durability`, `advice`
    derived: dict[str, JSONValue] = field(default_factory=dict)


@dataclass(frozen=True)
class RunRecord:
    """A run as read back from the store."""

    id: int
    plan: str
    status: str
    started_at: str
    finished_at: str | None
    environment: dict[str, JSONValue]
    targets: list[TargetRecord]
    steps: list[StepRecord]
    label: str | None = None

    def document(
        self, *, with_series: bool = False, sections: Sequence[str] = CONTRACT_SECTIONS
    ) -> dict[str, JSONValue]:
        """DESIGN's run document, each step with its sampled `sections`. Series and histograms
        only when asked for: they are large."""
        steps = []
        for s in self.steps:
            doc: dict[str, JSONValue] = {
                "id": str(s.id),
                "target": s.target,
                "workload": s.workload,
                "params": s.all_params,
                "asked": s.params,
                "resolved": s.resolved,
                "status": s.status,
                "error": s.error,
                "started_at": s.started_at,
                "finished_at": s.finished_at,
                "metrics": s.metrics,
                "warnings": s.warnings,
            }
            for section in sections:  # null for steps that were not sampled
                doc[section] = s.sections.get(section)
            # What limited the step (analysis/why.py): pgbench steps, derived when read.
            doc["why"] = s.sections.get("why")
            events = s.sections.get("events")
            if isinstance(events, dict):  # a step run with events: each one's figures
                doc["events"] = events.get("figures", [])
            if with_series:
                # JSON has no NaN: a missing value is null.
                doc["series"] = {
                    name: [[p.t, p.value if math.isfinite(p.value) else None] for p in points]
                    for name, points in s.series.items()
                }
                doc["histograms"] = {
                    name: {str(k): v for k, v in sorted(h.items())}
                    for name, h in s.histograms.items()
                }
            steps.append(doc)
        return {
            "id": str(self.id),
            "plan": self.plan,
            "label": self.label,
            "status": self.status,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "environment": self.environment,
            "targets": [
                {
                    "name": t.name,
                    "kind": t.kind,
                    "location": t.location,
                    "pg_version": t.pg_version,
                    "settings": t.settings,
                    "device": t.device,
                    "standbys": list(t.standbys),
                    "client": t.client or None,
                    # Can these flushes survive a crash, and what to try (docs/why.md)
                    "durability": t.derived.get("durability"),
                    "advice": t.derived.get("advice"),
                }
                for t in self.targets
            ],
            "steps": steps,
        }


@dataclass(frozen=True)
class RunSummary:
    """One line of `results list`."""

    id: int
    plan: str
    status: str
    started_at: str
    finished_at: str | None
    label: str | None
    targets: tuple[str, ...]
    step_count: int
