"""What a workload adds when a run is read: its part of the derivation (analysis/derive.py),
declared by its plugin as `analysis = "module:attribute"` (plugin/workload.py) and imported
here, so that analysis names no workload. A workload without one reads as stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from howfast.model import JSONValue, StepRecord
from howfast.plugin import registry
from howfast.plugin.loading import load


@dataclass(frozen=True)
class Derived:
    """What a hook adds to one step. Its metrics join the step's (the tool's own figures win);
    a step stored with frozen figures (legacy) gives up the `owned` names first."""

    metrics: Mapping[str, JSONValue] = field(default_factory=dict)
    owned: frozenset[str] = frozenset()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeriveContext:
    imported: bool = False  # the step came from `howfast import`: its params are the tool's
    target_settings: Mapping[str, str] | None = None


class WorkloadAnalysis:
    """A workload's part of reading a run. The defaults add nothing."""

    def derive_step(
        self, step: StepRecord, before: Sequence[StepRecord], ctx: DeriveContext
    ) -> Derived:
        """What the step's own data says; `before`: the target's earlier steps, derived."""
        return Derived()


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
