"""The toy sampler: /proc/loadavg's 1-minute figure at each tick, in its own section."""

from __future__ import annotations

from pathlib import Path

from howfast.model import Sample
from howfast.samplers.base import PeriodicSampler, SamplerContext, SamplerResult
from howfast.samplers.plugin import SamplerPlugin, SamplerSetup

LOADAVG = Path("/proc/loadavg")


class LoadAverageSampler(PeriodicSampler):
    name = "loadavg"

    def __init__(self) -> None:
        super().__init__()
        self.points: list[Sample] = []

    def begin(self, ctx: SamplerContext) -> None:
        self.tick(0.0)

    def tick(self, t: float) -> None:
        self.points.append(Sample(t, float(LOADAVG.read_text().split()[0])))

    def result(self) -> SamplerResult:
        values = [p.value for p in self.points]
        section = {"readings": len(values), "max_1m": max(values, default=None)}
        return SamplerResult(series={"loadavg_1m": self.points}, sections={"loadavg": section})


def _create(setup: SamplerSetup) -> LoadAverageSampler | None:
    return LoadAverageSampler() if LOADAVG.exists() else None


SAMPLER = SamplerPlugin("loadavg", _create, order=90, sections=("loadavg",))
