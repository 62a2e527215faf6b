"""Samplers, found rather than listed: every module of howfast.samplers that defines a
module-level `SAMPLER` (a SamplerPlugin, samplers/plugin.py) takes part.

A SamplerPlugin says which workloads it watches, by their plugins' traits (by default every
workload whose plugin is `sampled`), and how to make its sampler for a target (None when the
target has nothing for it: no server, no server log, no memory cgroup), and which sections of a
step's document its results go into. Adding a sampler is one new module, or a module of a
distribution of its own with an entry point in the `howfast.samplers` group (found as
workloads are: plugin/discovery.py).

    setup = SamplerSetup(target, connection, role_devices, host)
    samplers = create_samplers("pgbench", setup)   # in their order, ready to start
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from howfast.plugin.discovery import Discovery, discover
from howfast.samplers.plugin import SamplerPlugin, SamplerSetup

if TYPE_CHECKING:
    from howfast.samplers.base import Sampler


def _name(plugin: SamplerPlugin) -> str:
    return plugin.name


DISCOVERY = Discovery(
    noun="sampler",
    cls=SamplerPlugin,
    package="howfast.samplers",
    attribute="SAMPLER",
    group="howfast.samplers",  # samplers installed apart: [project.entry-points."howfast.samplers"]
    name_of=_name,
)


@functools.cache
def sampler_plugins() -> tuple[SamplerPlugin, ...]:
    """Every sampler plugin, built in or installed apart, in their order."""
    found = discover(DISCOVERY)
    return tuple(sorted(found.values(), key=lambda p: (p.order, p.name)))


# The session's own section: the roles' devices, the interval, the step's length (session.py).
SESSION_SECTIONS = ("io",)


def step_sections() -> tuple[str, ...]:
    """The sections sampling adds to a step's document: the session's, then those each
    sampler declares, in the samplers' order (each once)."""
    declared = (name for plugin in sampler_plugins() for name in plugin.sections)
    return tuple(dict.fromkeys((*SESSION_SECTIONS, *declared)))


def samplers_for(workload: str) -> list[SamplerPlugin]:
    """The sampler plugins that watch steps of `workload` (each asks the workload's traits:
    by default whether it is `sampled`, which pgbench-init and pg_test_fsync are not); none
    for a workload this howfast does not know."""
    from howfast.plugin.registry import find

    plugin = find(workload)
    if plugin is None:
        return []
    return [s for s in sampler_plugins() if s.watches(plugin)]


def create_samplers(workload: str, setup: SamplerSetup) -> list[Sampler]:
    """New samplers for one step of `workload` on this target, in their order."""
    return [s for p in samplers_for(workload) if (s := p.create(setup)) is not None]
