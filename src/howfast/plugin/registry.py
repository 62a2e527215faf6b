"""Workloads, found rather than listed: every module of howfast.workloads' packages named
`plan` that defines a module-level `PLUGIN` (a WorkloadPlugin).

Adding a workload is one new package whose plan module holds its plan model, expansion,
labels, expected duration, metrics and the name of its executor (plugin/workload.py).
Discovery imports only those plan modules, never the executors. The workloads package is
named, not imported by an import statement: it sits above this layer (docs/architecture.md),
and only its plan modules are loaded here.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Mapping
from typing import Any

from howfast.model import JSONValue
from howfast.plugin.workload import StepModel, WorkloadPlugin

Plugin = WorkloadPlugin[Any]

WORKLOADS_PACKAGE = "howfast.workloads"


def _is_plan_module(name: str) -> bool:
    return name.rpartition(".")[2] == "plan"


@functools.cache
def plugins() -> dict[str, Plugin]:
    """Every workload plugin by name, in their `order`."""
    package = importlib.import_module(WORKLOADS_PACKAGE)
    found: dict[str, Plugin] = {}
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if info.ispkg or not _is_plan_module(info.name):
            continue
        plugin = getattr(importlib.import_module(info.name), "PLUGIN", None)
        if not isinstance(plugin, WorkloadPlugin):
            continue
        if plugin.name in found:
            raise RuntimeError(f"workload {plugin.name!r} is defined twice ({info.name})")
        found[plugin.name] = plugin
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


def plugin(name: str) -> Plugin:
    """The plugin of workload `name`; ValueError names the known ones."""
    try:
        return plugins()[name]
    except KeyError:
        known = ", ".join(plugins())
        raise ValueError(f"unknown workload {name!r}; known: {known}") from None


def find(name: str) -> Plugin | None:
    """The plugin of workload `name`, None for one this howfast does not know (an old run)."""
    return plugins().get(name)


def step_models() -> dict[str, type[StepModel]]:
    """The plan model of each workload's `[[steps]]` table, by its `workload` key."""
    return {name: p.model for name, p in plugins().items()}


def expected_seconds(workload: str, params: Mapping[str, JSONValue]) -> float | None:
    """How long a step should take, for ETAs; None when unknown."""
    found = find(workload)
    return found.expected_seconds(params) if found else None
