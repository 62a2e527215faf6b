"""Workloads: one tool invocation with its parameters.

Each workload is found, not listed: a plan module (`pgbench/plan.py`, `seqread_plan.py`...)
defines its `PLUGIN` (workloads/plugin.py: step model, expansion, labels, duration, metrics,
and which executor runs it); workloads/registry.py discovers them. A new tool is one new plan
module plus its executor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from howfast.workloads.base import Workload


def get_workload(name: str) -> Workload:
    """A new executor for workload `name`; ValueError names the known workloads."""
    from howfast.workloads.registry import plugin

    return plugin(name).executor()
