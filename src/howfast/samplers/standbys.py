"""The standbys' own I/O during a pgbench step (issue 28): what each standby of a primary
howfast created wrote and read, from its own I/O cgroup and its processes' /proc/PID/io,
read as the server-I/O sampler reads the primary's (samplers/serverio.py), at the start and
the end of the step.

Section `io.standbys.<name>`: the server-I/O sampler's shape (`source`, `cgroup`, `seconds`,
`proc`, `cgroup_total`). The design's bytes written per transaction (primary and standbys)
are derived when the run is read (analysis/replication.py).
"""

from __future__ import annotations

from typing import Any

from howfast.model import JSONValue
from howfast.plugin.workload import WorkloadPlugin
from howfast.samplers.base import Sampler, SamplerContext, SamplerResult, describe_failure
from howfast.samplers.plugin import SamplerPlugin, SamplerSetup
from howfast.samplers.serverio import ServerIoSampler
from howfast.targets.capabilities import HasStandbys


class StandbysIoSampler(Sampler):
    """One reading per standby at the start, one at the end: no thread of its own."""

    name = "standby-io"

    def __init__(self, standbys: dict[str, ServerIoSampler]) -> None:
        self.standbys = standbys
        self.started: dict[str, ServerIoSampler] = {}
        self.warnings: list[str] = []
        self.ctx: SamplerContext | None = None

    def start(self, ctx: SamplerContext) -> None:
        self.ctx = ctx
        for name, reader in self.standbys.items():
            try:
                reader.begin(ctx)
            except Exception as exc:  # a standby gone: the step goes on, said once
                self.warnings.append(f"sampler {self.name} ({name}): {describe_failure(exc)}")
                continue
            self.started[name] = reader

    def stop(self) -> SamplerResult:
        out = SamplerResult(warnings=list(self.warnings))
        sections: dict[str, JSONValue] = {}
        for name, reader in self.started.items():
            try:
                assert self.ctx is not None
                reader.tick(self.ctx.now())
                part = reader.result().sections["io"]["postgres"]
            except Exception as exc:
                out.warnings.append(f"sampler {self.name} ({name}): {describe_failure(exc)}")
                continue
            sections[name] = part
        if sections:
            out.sections["io"] = {"standbys": sections}
        return out


def _create(setup: SamplerSetup) -> StandbysIoSampler | None:
    target = setup.target
    if not isinstance(target, HasStandbys):
        return None
    readers = {}
    for standby in target.standbys():
        source = standby.server_io()
        if source is not None:
            readers[standby.name] = ServerIoSampler(source, {})
    return StandbysIoSampler(readers) if readers else None


def _watches(workload: WorkloadPlugin[Any]) -> bool:
    """Steps whose sessions write through the primary to its standbys (pgbench)."""
    return workload.sampled and workload.drives_sessions


# Those steps, on a primary howfast gave standbys (samplers/registry.py).
SAMPLER = SamplerPlugin("standby-io", _create, watches=_watches, order=26, sections=("io",))
