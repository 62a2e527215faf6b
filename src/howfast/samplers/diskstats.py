"""Block device counters from /proc/diskstats, and what they mean per interval.

`DiskSampler` reads the file once per tick for every device that serves a role (data, WAL;
each standby's data on a primary howfast gave standbys on this machine: `standby_1`...).
The parser and iostat's arithmetic are pure and live in howfast/diskcounters.py, where analysis
reads them too; they are importable from here as well.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from howfast.diskcounters import (
    CUMULATIVE,
    DISKSTATS,
    SECTOR,
    DiskCounters,
    DiskRates,
    counter_delta,
    counters_from_delta,
    parse_diskstats,
    rates,
)
from howfast.model import JSONValue, Sample
from howfast.samplers.base import PeriodicSampler, SamplerContext, SamplerResult
from howfast.samplers.plugin import SamplerPlugin, SamplerSetup

if TYPE_CHECKING:
    from howfast.hosts.base import Host

# Per-interval series of each role; the name is `io.<role>.<field>`.
SERIES_FIELDS = (
    "read_iops",
    "write_iops",
    "read_mbps",
    "write_mbps",
    "avg_read_kib",
    "avg_write_kib",
    "read_await_ms",
    "write_await_ms",
    "read_merges_per_s",
    "write_merges_per_s",
    "queue_depth",
    "util_pct",
    "flushes_per_s",
)


@dataclass(frozen=True)
class Reading:
    t: float
    counters: DiskCounters


def role_series(readings: list[Reading]) -> dict[str, list[Sample]]:
    """Field -> points, one per interval between consecutive readings, at the interval's end
    (as pgbench's progress lines and iostat report)."""
    series: dict[str, list[Sample]] = {name: [] for name in SERIES_FIELDS}
    for a, b in itertools.pairwise(readings):
        r = rates(a.counters, b.counters, b.t - a.t)
        for name in SERIES_FIELDS:
            value = getattr(r, name)
            if value is not None:
                series[name].append(Sample(round(b.t, 3), float(value)))
    return {name: points for name, points in series.items() if points}


__all__ = [
    "CUMULATIVE",
    "DISKSTATS",
    "SECTOR",
    "SERIES_FIELDS",
    "DiskCounters",
    "DiskRates",
    "DiskSampler",
    "Reading",
    "counter_delta",
    "counters_from_delta",
    "parse_diskstats",
    "rates",
    "role_series",
]


class DiskSampler(PeriodicSampler):
    """Samples the devices behind each role; a device serving several roles once, under its
    first role (the session says which roles share it)."""

    name = "diskstats"

    def __init__(
        self, role_devices: dict[str, str], path: Path = DISKSTATS, host: Host | None = None
    ) -> None:
        super().__init__()
        self.role_devices = role_devices  # role -> device name as /proc/diskstats spells it
        self.path = path
        # A host reads the file where the server runs (a pod: the node's, by exec).
        self.host = host
        self.source = host.proc_source("diskstats") if host else str(path)
        self.readings: dict[str, list[Reading]] = {role: [] for role in role_devices}

    def _read(self) -> str:
        if self.host is None:
            return self.path.read_text()
        return self.host.read_proc("diskstats")["diskstats"]

    def begin(self, ctx: SamplerContext) -> None:
        found = parse_diskstats(self._read())
        missing = sorted({d for d in self.role_devices.values() if d not in found})
        if missing:
            raise RuntimeError(f"{', '.join(missing)} not in {self.source}")
        self._record(ctx.now(), found)

    def tick(self, t: float) -> None:
        self._record(t, parse_diskstats(self._read()))

    def _record(self, t: float, found: dict[str, DiskCounters]) -> None:
        for role, device in self.role_devices.items():
            if device in found:
                self.readings[role].append(Reading(t, found[device]))

    def result(self) -> SamplerResult:
        out = SamplerResult()
        roles: dict[str, JSONValue] = {}
        for role, readings in self.readings.items():
            for name, points in role_series(readings).items():
                out.series[f"io.{role}.{name}"] = points
            if len(readings) >= 2:
                first, last = readings[0], readings[-1]
                # The raw counter differences: every figure of the step is derived from them.
                roles[role] = {
                    "device": self.role_devices[role],
                    "seconds": round(last.t - first.t, 3),
                    "delta": counter_delta(first.counters, last.counters),
                }
        out.sections["io"] = {"roles": roles, "source": self.source}
        return out


def _create(setup: SamplerSetup) -> DiskSampler | None:
    role_devices = {**setup.role_devices, **setup.standby_devices}
    if not role_devices:
        return None
    return DiskSampler(role_devices, host=setup.host)


# Every sampled step whose target's devices are known (samplers/registry.py).
SAMPLER = SamplerPlugin("diskstats", _create, order=20, sections=("io",))
