"""PostgreSQL's own I/O during a step: its I/O cgroup's counters per device, and /proc/PID/io of
its processes, beside the whole device's counters of the diskstats sampler.

For a server howfast started on this machine (`Target.server_io()`; see machine/serverio.py
for where the figures come from and what each source misses), and, as ContainerServerSampler,
for a server in a pod: its container's own cgroup (I/O, CPU and throttling) and processes, read
through the host (`Host.server_counters()`, by exec; docs/kubernetes.md).

/proc/PID/io of the postmaster includes what its children did once they exited (the kernel
adds a reaped child's counters to its parent's), so the step's bytes are

    postmaster's gain + live children's gain - what children gone since the start had done
    before it

which counts backends that came and went between two readings.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from howfast.machine.podread import ContainerCpu, ServerReading
from howfast.machine.serverio import FIELDS, ServerIo, device_numbers, parse_proc_io
from howfast.model import JSONValue, Sample
from howfast.samplers.base import PeriodicSampler, SamplerContext, SamplerResult
from howfast.samplers.plugin import SamplerPlugin, SamplerSetup
from howfast.targets.capabilities import HasLocalServer

if TYPE_CHECKING:
    from howfast.hosts.base import ServerCounters

PROC = Path("/proc")
# Per-interval series of the cgroup's counters: name, counter, divisor.
IO_SERIES = (
    ("read_mbps", "read_bytes", 1e6),
    ("write_mbps", "write_bytes", 1e6),
    ("read_iops", "read_ios", 1.0),
    ("write_iops", "write_ios", 1.0),
)


def children(pid: int, proc: Path = PROC) -> list[int]:
    """Direct children of a process (the postmaster's backends and auxiliary processes)."""
    try:
        text = (proc / str(pid) / "task" / str(pid) / "children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split() if p.isdigit()]


def read_proc_io(pid: int, proc: Path = PROC) -> dict[str, int] | None:
    try:
        return parse_proc_io((proc / str(pid) / "io").read_text())
    except OSError:
        return None


@dataclass
class ProcessIo:
    """Bytes the server's processes read and wrote since the first reading (see the module
    docstring for how exited processes are kept)."""

    postmaster: int
    base: dict[int, dict[str, int]] = field(default_factory=dict)
    last: dict[int, dict[str, int]] = field(default_factory=dict)
    gone: set[int] = field(default_factory=set)  # present at the first reading, exited since

    def update(self, readings: dict[int, dict[str, int]], first: bool = False) -> None:
        if first:
            self.base = dict(readings)
        self.last = {**{p: r for p, r in self.last.items() if p == self.postmaster}, **readings}
        self.gone = {p for p in self.base if p not in readings and p != self.postmaster}

    def totals(self) -> dict[str, int]:
        out = {"read_bytes": 0, "write_bytes": 0}
        for key in out:
            total = 0
            for pid, reading in self.last.items():
                before = self.base.get(pid, {})
                total += reading.get(key, 0) - before.get(key, 0)
                if key == "write_bytes":
                    total -= reading.get("cancelled_write_bytes", 0) - before.get(
                        "cancelled_write_bytes", 0
                    )
            for pid in self.gone:
                total -= self.base[pid].get(key, 0)
                if key == "write_bytes":
                    total += self.base[pid].get("cancelled_write_bytes", 0)
            out[key] = max(0, total)
        return out


def role_counters(
    cgroup: dict[str, dict[str, int]], numbers: dict[str, str]
) -> dict[str, dict[str, int]]:
    """The cgroup's counters of each role's device (role -> MAJ:MIN given in `numbers`)."""
    return {role: dict(cgroup.get(num, dict.fromkeys(FIELDS, 0))) for role, num in numbers.items()}


def counter_delta(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: max(0, b.get(k, 0) - a.get(k, 0)) for k in FIELDS}


@dataclass
class Reading:
    t: float
    roles: dict[str, dict[str, int]]  # cgroup counters per role
    all_devices: dict[str, int]  # cgroup counters summed over every device
    proc: dict[str, int]  # /proc/PID/io totals since the first reading


class ServerIoSampler(PeriodicSampler):
    name = "serverio"

    def __init__(self, source: ServerIo, role_devices: dict[str, str]) -> None:
        super().__init__()
        self.source = source
        self.numbers = {
            role: num for role, dev in role_devices.items() if (num := device_numbers(dev))
        }
        self.processes: ProcessIo | None = None
        self.readings: list[Reading] = []

    def begin(self, ctx: SamplerContext) -> None:
        pid = self.source.postmaster()
        if pid is None:
            raise RuntimeError("the server is not running")
        self.processes = ProcessIo(pid)
        self._read(ctx.now(), first=True)

    def _pids(self) -> list[int]:
        assert self.processes is not None
        pm = self.processes.postmaster
        return [pm, *children(pm)]

    def _read(self, t: float, first: bool = False) -> None:
        assert self.processes is not None
        readings = {p: r for p in self._pids() if (r := read_proc_io(p)) is not None}
        self.processes.update(readings, first=first)
        cgroup: dict[str, dict[str, int]] = {}
        if self.source.account is not None:
            cgroup = self.source.account.read()
        summed = dict.fromkeys(FIELDS, 0)
        for row in cgroup.values():
            for k in FIELDS:
                summed[k] += row.get(k, 0)
        self.readings.append(
            Reading(t, role_counters(cgroup, self.numbers), summed, self.processes.totals())
        )

    def tick(self, t: float) -> None:
        self._read(t)

    def result(self) -> SamplerResult:
        out = SamplerResult()
        account = self.source.account
        section: dict[str, JSONValue] = {
            "source": (f"cgroup {account.version} + /proc/PID/io" if account else "/proc/PID/io"),
            "cgroup": str(account.path) if account else None,
            "note": self.source.note,
        }
        if account is not None and not account.counting:
            section["cgroup_counting"] = False  # analysis/own_io.py then reads /proc/PID/io
        if len(self.readings) >= 2:
            first, last = self.readings[0], self.readings[-1]
            section["seconds"] = round(last.t - first.t, 3)
            section["proc"] = dict(last.proc)
            if account is not None:
                section["cgroup_total"] = counter_delta(first.all_devices, last.all_devices)
                section["roles"] = {
                    role: counter_delta(first.roles.get(role, {}), last.roles[role])
                    for role in last.roles
                }
            out.series.update(self._series())
        out.sections["io"] = {"postgres": section}
        return out

    def _series(self) -> dict[str, list[Sample]]:
        series: dict[str, list[Sample]] = {}
        for a, b in itertools.pairwise(self.readings):
            seconds = b.t - a.t
            if seconds <= 0:
                continue
            t = round(b.t, 3)
            add_role_rates(series, t, seconds, a.roles, b.roles)
            add_proc_rates(series, t, seconds, a.proc, b.proc)
        return series


def cpu_usage(a: ContainerCpu, b: ContainerCpu, seconds: float) -> dict[str, JSONValue]:
    """The container's CPU between two readings: % of one core, and how much of the time
    its CPU limit held it back (throttled periods out of all periods)."""
    out: dict[str, JSONValue] = {}
    if a.usage_ns is not None and b.usage_ns is not None and seconds > 0:
        used_s = max(0, b.usage_ns - a.usage_ns) / 1e9
        out["cpu_s"] = round(used_s, 3)
        out["cpu_pct"] = round(100 * used_s / seconds, 2)
    if None not in (a.periods, b.periods, a.throttled_periods, b.throttled_periods):
        periods = int(b.periods or 0) - int(a.periods or 0)
        throttled = int(b.throttled_periods or 0) - int(a.throttled_periods or 0)
        out["periods"] = periods
        out["throttled_periods"] = throttled
        out["throttled_periods_pct"] = round(100 * throttled / periods, 2) if periods > 0 else 0.0
    if a.throttled_ns is not None and b.throttled_ns is not None:
        out["throttled_s"] = round(max(0, b.throttled_ns - a.throttled_ns) / 1e9, 3)
    return out


@dataclass
class ContainerReading:
    t: float
    reading: ServerReading
    proc: dict[str, int]  # /proc/PID/io totals since the first reading


class ContainerServerSampler(PeriodicSampler):
    """The same figures as ServerIoSampler, and the container's CPU, for a server in a
    container whose counters the host reads (a pod's, by exec): its own cgroup (I/O per
    device, CPU and throttling) and /proc/PID/io of its processes."""

    name = "serverio"

    def __init__(self, counters: ServerCounters, role_devices: dict[str, str]) -> None:
        super().__init__()
        self.counters = counters
        self.role_devices = role_devices
        self.numbers: dict[str, str] = {}
        self.processes: ProcessIo | None = None
        self.readings: list[ContainerReading] = []

    def begin(self, ctx: SamplerContext) -> None:
        self.numbers = {
            role: num
            for role, dev in self.role_devices.items()
            if (num := self.counters.device_number(dev))
        }
        self._read(ctx.now())

    def _read(self, t: float) -> None:
        reading = self.counters.read()
        if self.processes is None:
            if reading.postmaster is None:
                raise RuntimeError("the server is not running")
            self.processes = ProcessIo(reading.postmaster)
            self.processes.update(reading.processes, first=True)
        else:
            self.processes.update(reading.processes)
        self.readings.append(ContainerReading(t, reading, self.processes.totals()))

    def tick(self, t: float) -> None:
        self._read(t)

    def result(self) -> SamplerResult:
        out = SamplerResult()
        io: dict[str, JSONValue] = {
            "source": self.counters.source,
            "cgroup": self.counters.cgroup,
            "note": self.counters.note,
        }
        cpu: dict[str, JSONValue] = {"source": self.counters.source}
        if len(self.readings) >= 2:
            first, last = self.readings[0], self.readings[-1]
            seconds = last.t - first.t
            io["seconds"] = cpu["seconds"] = round(seconds, 3)
            io["proc"] = dict(last.proc)
            io["cgroup_total"] = counter_delta(_summed(first.reading.io), _summed(last.reading.io))
            io["roles"] = {
                role: counter_delta(first.reading.io.get(num, {}), last.reading.io.get(num, {}))
                for role, num in self.numbers.items()
            }
            cpu.update(cpu_usage(first.reading.cpu, last.reading.cpu, seconds))
            out.series.update(self._series())
        out.sections["io"] = {"postgres": io}
        out.sections["cpu"] = {"server_container": cpu}
        return out

    def _series(self) -> dict[str, list[Sample]]:
        series: dict[str, list[Sample]] = {}
        for a, b in itertools.pairwise(self.readings):
            seconds = b.t - a.t
            if seconds <= 0:
                continue
            t = round(b.t, 3)
            before = {role: a.reading.io.get(num, {}) for role, num in self.numbers.items()}
            after = {role: b.reading.io.get(num, {}) for role, num in self.numbers.items()}
            add_role_rates(series, t, seconds, before, after)
            add_proc_rates(series, t, seconds, a.proc, b.proc)
            used = cpu_usage(a.reading.cpu, b.reading.cpu, seconds).get("cpu_pct")
            if isinstance(used, float):
                series.setdefault("cpu.server_container_pct", []).append(Sample(t, used))
        return series


def add_role_rates(
    series: dict[str, list[Sample]],
    t: float,
    seconds: float,
    before: Mapping[str, dict[str, int]],
    after: Mapping[str, dict[str, int]],
) -> None:
    """The server's own I/O per role between two readings, as `pgio.<role>.<name>` points."""
    for role, counters in after.items():
        d = counter_delta(before.get(role, {}), counters)
        for name, key, scale in IO_SERIES:
            series.setdefault(f"pgio.{role}.{name}", []).append(Sample(t, d[key] / scale / seconds))


def add_proc_rates(
    series: dict[str, list[Sample]],
    t: float,
    seconds: float,
    before: Mapping[str, int],
    after: Mapping[str, int],
) -> None:
    """What the server's processes read and wrote between two readings (/proc/PID/io), as
    `pgio.proc.read_mbps` and `pgio.proc.write_mbps` points."""
    for key in ("read_bytes", "write_bytes"):
        rate = max(0, after[key] - before[key]) / 1e6 / seconds
        series.setdefault(f"pgio.proc.{key.split('_')[0]}_mbps", []).append(Sample(t, rate))


def _summed(io: dict[str, dict[str, int]]) -> dict[str, int]:
    total = dict.fromkeys(FIELDS, 0)
    for row in io.values():
        for k in FIELDS:
            total[k] += row.get(k, 0)
    return total


def _create(setup: SamplerSetup) -> PeriodicSampler | None:
    target = setup.target
    source = target.server_io() if isinstance(target, HasLocalServer) else None
    if source is not None:
        return ServerIoSampler(source, setup.role_devices)
    counters = setup.host.server_counters() if setup.host is not None else None
    return ContainerServerSampler(counters, setup.role_devices) if counters else None


# Every sampled step on a server howfast started here, or in a pod (samplers/registry.py).
SAMPLER = SamplerPlugin("serverio", _create, order=25, sections=("io", "cpu"))
