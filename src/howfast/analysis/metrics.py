"""What each metric is: a readable name, its unit, and which way is better.

Statistics, comparisons and reports share this catalogue so that every figure carries its unit
and a comparison knows whether a higher value is an improvement. Each workload declares its own
metrics, the ones summarised and compared (key) and the few people quote (headline) in its
plan module (plugin/workload.py); the mappings here are read from the workload registry the
first time they are used, so that importing analysis never imports the workloads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Generic, TypeVar

from howfast.metric import Metric

if TYPE_CHECKING:
    from howfast.plugin.registry import Plugin


_V = TypeVar("_V")


class _FromWorkloads(Mapping[str, _V], Generic[_V]):
    """A read-only mapping built from the workload plugins on first use."""

    def __init__(self, build: Callable[[Mapping[str, Plugin]], dict[str, _V]]) -> None:
        self._build = build
        self._data: dict[str, _V] = {}
        self._source: Mapping[str, Plugin] | None = None

    def _mapping(self) -> dict[str, _V]:
        from howfast.plugin.registry import plugins

        found = plugins()
        if found is not self._source:  # built again when the registry was reset
            self._data, self._source = self._build(found), found
        return self._data

    def __getitem__(self, key: str) -> _V:
        return self._mapping()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping())

    def __repr__(self) -> str:
        return repr(self._mapping())


# Every workload's catalogue entries, by metric name.
METRICS: Mapping[str, Metric] = _FromWorkloads(
    lambda found: {m.name: m for p in found.values() for m in p.metrics}
)
# The metrics summarised over repetitions and compared, per workload, in this order. The
# steady_* ones come from the per-second series (analysis/steady.py), not from the tool.
KEY_METRICS: Mapping[str, tuple[str, ...]] = _FromWorkloads(
    lambda found: {name: p.key_metrics for name, p in found.items() if p.key_metrics}
)
# The few figures people quote, for views with little room (the terminal's compare).
HEADLINE_METRICS: Mapping[str, tuple[str, ...]] = _FromWorkloads(
    lambda found: {name: p.headline_metrics for name, p in found.items() if p.headline_metrics}
)


def metric(name: str) -> Metric:
    """The catalogue entry, or a neutral one for a metric it does not know."""
    return METRICS.get(name) or Metric(name, name, "", None, 2)


def with_unit(name: str) -> str:
    """'TPS (tx/s)', 'p99 latency (ms)'."""
    m = metric(name)
    # A label that names its unit ('read IOPS') has it already; sizes print their own (MiB).
    if not m.unit or m.unit == "bytes" or m.unit in m.label.split():
        return m.label
    return f"{m.label} ({m.unit})"
