"""Memory of the `--memory` cgroup the server runs in: how close it came to its cap.

Usage is read every tick; the step's peak is exact on cgroup v1 (its peak counter is reset
when the step starts) and the highest sample on v2.
"""

from __future__ import annotations

from howfast.machine.cgroup import MemoryCgroup
from howfast.model import JSONValue, Sample
from howfast.samplers.base import PeriodicSampler, SamplerContext, SamplerResult
from howfast.samplers.plugin import SamplerPlugin, SamplerSetup
from howfast.targets.capabilities import HasLocalServer


class CgroupMemorySampler(PeriodicSampler):
    name = "cgroup-memory"

    def __init__(self, group: MemoryCgroup) -> None:
        super().__init__()
        self.group = group
        self.exact_peak = False
        self.usage: list[Sample] = []

    def begin(self, ctx: SamplerContext) -> None:
        self.exact_peak = self.group.reset_peak()
        self.tick(ctx.now())

    def tick(self, t: float) -> None:
        usage = self.group.usage_bytes()
        if usage is not None:
            self.usage.append(Sample(round(t, 3), float(usage)))

    def result(self) -> SamplerResult:
        out = SamplerResult()
        peak = self.group.peak_bytes() if self.exact_peak else None
        if peak is None and self.usage:
            peak = int(max(p.value for p in self.usage))
        if self.usage:
            out.series["mem.cgroup_bytes"] = list(self.usage)
        out.metrics["cgroup_memory_limit_bytes"] = self.group.limit_bytes
        if peak is not None:
            out.metrics["cgroup_memory_peak_bytes"] = peak
        section: dict[str, JSONValue] = {
            "limit_bytes": self.group.limit_bytes,
            "peak_bytes": peak,
            "peak_from": "cgroup counter" if self.exact_peak else "samples",
        }
        out.sections["cpu"] = {"memory_cgroup": section}
        return out


def _create(setup: SamplerSetup) -> CgroupMemorySampler | None:
    target = setup.target
    group = target.memory_cgroup() if isinstance(target, HasLocalServer) else None
    return CgroupMemorySampler(group) if group is not None else None


# Every sampled step on a target whose server runs in a memory cgroup (samplers/registry.py).
SAMPLER = SamplerPlugin("cgroupmem", _create, order=50, sections=("cpu",))
