"""Workloads, found rather than listed: every module of howfast.workloads' packages named
`plan` that defines a module-level `PLUGIN` (a WorkloadPlugin), and every plugin an installed
distribution declares in the `howfast.workloads` entry-point group.

Adding a workload is one new package whose plan module holds its plan model, expansion,
labels, params, metrics, traits and the names of its parts (plugin/workload.py). Outside
howfast, the same package in a distribution of its own, with an entry point:

    [project.entry-points."howfast.workloads"]
    sysbench = "howfast_sysbench.plan:PLUGIN"

Discovery (plugin/discovery.py, as for samplers, target kinds and event actions) imports only
plan modules, never the executors. The workloads package is named, not imported by an import
statement: it sits above this layer (docs/architecture.md), and only its plan modules are
loaded here.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from howfast.model import JSONValue
from howfast.plugin.discovery import Discovery, discover
from howfast.plugin.workload import COMMON_TEST_PARAMS, Program, StepModel, WorkloadPlugin

Plugin = WorkloadPlugin[Any]

WORKLOADS_PACKAGE = "howfast.workloads"
ENTRY_POINTS = "howfast.workloads"  # the entry-point group of workloads installed apart


def _is_plan_module(name: str) -> bool:
    return name.rpartition(".")[2] == "plan"


def _name(plugin: Plugin) -> str:
    return plugin.name


DISCOVERY = Discovery(
    noun="workload",
    cls=WorkloadPlugin,
    package=WORKLOADS_PACKAGE,
    attribute="PLUGIN",
    group=ENTRY_POINTS,
    name_of=_name,
    module_filter=_is_plan_module,
    nested=True,
)


@functools.cache
def plugins() -> dict[str, Plugin]:
    """Every workload plugin by name, in their `order` (then by name)."""
    found = discover(DISCOVERY)
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


def reset() -> None:
    """Find the plugins again on next use: for a process whose installed distributions
    changed (tests that add one)."""
    plugins.cache_clear()


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


def programs(source: str | None = None) -> list[Program]:
    """The programs the workloads run (`howfast doctor` checks them), each name once as its
    first workload declares it, in the workloads' order; only those found in `source`
    ("postgres": the PostgreSQL installation, "path": PATH) when given."""
    found: dict[str, Program] = {}
    for plugin in plugins().values():
        for program in plugin.programs:
            found.setdefault(program.name, program)
    return [p for p in found.values() if source is None or p.source == source]


def same_test_params(workload: str, params: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """The params that make two steps of `workload` the same test (plugin/workload.py
    `test_key`). A workload this howfast does not know (a run stored where a plug-in was
    installed) is grouped by every known workload's test params, as howfast did before
    workloads declared their own."""
    found = find(workload)
    if found is not None:
        return found.test_key(params)
    keys = {*COMMON_TEST_PARAMS, *(name for p in plugins().values() for name in p.test_params)}
    return {k: v for k, v in params.items() if k in keys}
