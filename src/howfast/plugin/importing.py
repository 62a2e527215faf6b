"""What a workload that can import its tool's output declares (`importer =
"module:attribute"` in its plugin, plugin/workload.py): `howfast import <command>` reads the
output into an ImportedRun, which service/importer.py stores as a run. The importer is a
pure parser: it reads text and stores nothing."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from howfast.import_text import TextSource
from howfast.model import JSONValue, StepRecord, StepStatus

Columns = tuple[Sequence[float], Sequence[float]]  # a series' times, and its values


@dataclass(frozen=True)
class ImportedStep:
    """One step of an imported output, before it has a target and a time."""

    workload: str
    params: Mapping[str, JSONValue]
    status: StepStatus
    metrics: Mapping[str, JSONValue]
    warnings: tuple[str, ...] = ()
    error: str | None = None
    histograms: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    # Per-second series as columns (a long run's progress lines: too many points to hold as
    # samples), stored as they are
    series: Mapping[str, Columns] = field(default_factory=dict)

    def record(self, target: str, at: str) -> StepRecord:
        return StepRecord(
            target=target,
            workload=self.workload,
            params=dict(self.params),
            status=self.status,
            started_at=at,
            finished_at=at,
            metrics=dict(self.metrics),
            warnings=list(self.warnings),
            error=self.error,
            histograms={name: dict(h) for name, h in self.histograms.items()},
        )


@dataclass(frozen=True)
class ImportedRun:
    """What an output holds: its steps in order, what it says of its environment (tool
    versions), and the server's PostgreSQL version when it says."""

    steps: tuple[ImportedStep, ...]
    environment: Mapping[str, JSONValue] = field(default_factory=dict)
    pg_version: str | None = None


class TextImporter(ABC):
    """`howfast import <command>`: its command's help, and the parser."""

    help: str  # the command's help: what it reads and stores, with an example (click's \b)
    label_help: str  # --label's help: "What was measured, e.g. 'ceph rbd'."

    @abstractmethod
    def read(self, text: str | TextSource, source_name: str) -> ImportedRun:
        """The steps of the output; UsageError (nothing is stored) when it holds none that
        can be stored. A TextSource may be read a few times, never held whole."""
