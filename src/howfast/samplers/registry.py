"""Samplers, found rather than listed: every module of howfast.samplers that defines a
module-level `SAMPLER` (a SamplerPlugin) takes part.

A SamplerPlugin says which workloads it watches (None: every workload whose plugin is
`sampled`) and how to make its sampler for a target (None when the target has nothing for it:
no server, no server log, no memory cgroup). Adding a sampler is one new module.

    setup = SamplerSetup(target, connection, role_devices, host)
    samplers = create_samplers("pgbench", setup)   # in their order, ready to start
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from howfast.hosts.base import Host
    from howfast.samplers.base import Sampler
    from howfast.targets.base import Connection, Target


@dataclass(frozen=True)
class SamplerSetup:
    """What a sampler factory may look at."""

    target: Target
    connection: Connection | None
    # role -> device name as /proc/diskstats spells it, for the roles the disk sampler reads
    # (a role whose device another role already has is left out).
    role_devices: dict[str, str] = field(default_factory=dict)
    # Where the tools and the server run: /proc and the server's counters are read through
    # it (a pod's by exec). None: this machine's /proc.
    host: Host | None = None


@dataclass(frozen=True)
class SamplerPlugin:
    name: str
    create: Callable[[SamplerSetup], Sampler | None]  # None: nothing to sample on this target
    workloads: frozenset[str] | None = None  # None: every sampled workload
    order: int = 100  # samplers start, and their results merge, in this order


@functools.cache
def sampler_plugins() -> tuple[SamplerPlugin, ...]:
    """Every sampler plugin, in their order."""
    import howfast.samplers as package

    found: dict[str, SamplerPlugin] = {}
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if info.name == __name__:
            continue
        plugin = getattr(importlib.import_module(info.name), "SAMPLER", None)
        if not isinstance(plugin, SamplerPlugin):
            continue
        if plugin.name in found:
            raise RuntimeError(f"sampler {plugin.name!r} is defined twice ({info.name})")
        found[plugin.name] = plugin
    return tuple(sorted(found.values(), key=lambda p: (p.order, p.name)))


def samplers_for(workload: str) -> list[SamplerPlugin]:
    """The sampler plugins that watch steps of `workload`; none for a workload that is not
    sampled (pgbench-init, pg_test_fsync) or not known."""
    from howfast.plugin.registry import find

    plugin = find(workload)
    if plugin is None or not plugin.sampled:
        return []
    return [s for s in sampler_plugins() if s.workloads is None or workload in s.workloads]


def create_samplers(workload: str, setup: SamplerSetup) -> list[Sampler]:
    """New samplers for one step of `workload` on this target, in their order."""
    return [s for p in samplers_for(workload) if (s := p.create(setup)) is not None]
