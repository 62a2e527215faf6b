"""What a target's latest load left for the steps after it: its scale, size and regime, read
from the stored steps. The workload that loads data says so (`loads_data`, plugin/workload.py);
the runner records it in the steps that read the tables, and analysis judges those steps'
regime by it. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from howfast.model import JSONValue, StepRecord
from howfast.plugin.registry import find


def loads_data(step: StepRecord) -> bool:
    """Whether the step (re)created the tables later steps read (pgbench-init)."""
    plugin = find(step.workload)
    return plugin is not None and plugin.loads_data


def latest_load(previous: Sequence[StepRecord]) -> StepRecord | None:
    """The latest of a target's steps that loaded data, whatever became of it."""
    return next((s for s in reversed(previous) if loads_data(s)), None)


@dataclass(frozen=True)
class LoadedData:
    """What the latest load on a target left; later steps record it."""

    scale: int
    db_size_bytes: int | None
    dataset: str | None = None  # the regime or size asked for (--dataset), None: a plain scale

    @classmethod
    def last_on(cls, previous: Sequence[StepRecord]) -> LoadedData | None:
        """From a target's finished steps; None when no load ran or the latest failed."""
        step = latest_load(previous)
        if step is None:
            return None
        params = step.all_params  # the scale a dataset was sized to is resolved
        scale, size = params.get("scale"), step.metrics.get("db_size_bytes")
        if step.status != "completed" or not isinstance(scale, int):
            return None
        dataset = params.get("dataset")
        return cls(
            scale,
            size if isinstance(size, int) else None,
            str(dataset) if dataset is not None else None,
        )

    def params(self) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {"scale": self.scale}
        if self.dataset is not None:
            out["dataset"] = self.dataset
        return out
