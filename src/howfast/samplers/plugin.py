"""What a sampler declares (SamplerPlugin) and what its factory may look at (SamplerSetup):
the interface each sampler module implements, apart from the registry that finds them
(samplers/registry.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from howfast.plugin.workload import WorkloadPlugin

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
    # (issue 28) standby name -> its device, for the standbys on devices of their own: the
    # disk sampler reads them as roles of their own; the primary's samplers do not.
    standby_devices: dict[str, str] = field(default_factory=dict)


def sampled(workload: WorkloadPlugin[Any]) -> bool:
    """Whether the samplers watch this workload's steps (its `sampled` trait)."""
    return workload.sampled


@dataclass(frozen=True)
class SamplerPlugin:
    name: str
    create: Callable[[SamplerSetup], Sampler | None]  # None: nothing to sample on this target
    # Which workloads' steps it watches, by their traits (plugin/workload.py); by default the
    # `sampled` ones. Waits: `lambda w: w.sampled and w.drives_sessions`.
    watches: Callable[[WorkloadPlugin[Any]], bool] = sampled
    order: int = 100  # samplers start, and their results merge, in this order
    # The sections of a step's document its results go into (SamplerResult.sections):
    # `results show --json` shows each of them, null for a step that was not sampled
    # (registry.step_sections).
    sections: tuple[str, ...] = ()
