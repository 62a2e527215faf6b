"""Workloads: one tool invocation with its parameters.

Each workload is found, not listed: a package whose `plan` module (`pgbench/plan.py`,
`seqread/plan.py`...) defines its `PLUGIN` (plugin/workload.py: step model, expansion,
labels, duration, metrics, and which executor runs it); plugin/registry.py discovers them. A
new tool is one new package: its plan module plus its executor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from howfast.plugin.loading import load
from howfast.plugin.registry import plugin

if TYPE_CHECKING:
    from howfast.workloads.base import Workload


def get_workload(name: str) -> Workload:
    """A new executor for workload `name`: the class its plugin names (`executor_class`),
    imported now; ValueError names the known workloads."""
    from howfast.workloads.base import Workload  # executors only when a step runs

    found = plugin(name)
    executor = load(found.executor_class)
    instance = executor() if callable(executor) else None
    if not isinstance(instance, Workload):
        raise TypeError(f"{found.executor_class} is not a Workload")
    return instance
