"""PostgreSQL's own I/O and CPU during a step for a server in a container whose counters the
host reads (a pod's, by exec): its own cgroup (I/O per device, CPU and throttling) and
/proc/PID/io of its processes, in the same io section as serverio.py's ServerIoSampler
(docs/kubernetes.md). A pod made again under the same name, or a server started again, is
another server: counters are never compared across servers."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from howfast.machine.podread import ContainerCpu, ServerReading
from howfast.machine.serverio import FIELDS
from howfast.model import JSONValue, Sample
from howfast.samplers.base import PeriodicSampler, SamplerContext, SamplerResult
from howfast.samplers.server_figures import (
    ProcessIo,
    add_proc_rates,
    add_role_rates,
    counter_delta,
    summed_fields,
)

if TYPE_CHECKING:
    from howfast.hosts.base import ServerCounters


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
    server: str | None  # the server read (ServerReading.server, or the last one known)
    container: str | None = None  # ServerReading.container, or the last one known

    @property
    def identity(self) -> tuple[str | None, str | None]:
        """Two readings with the same identity are of one server."""
        return self.server, self.container


def _named(server: str | None, container: str | None) -> str:
    return f"{server} in container {container}" if container is not None else str(server)


def replaced(last: ContainerReading, reading: ServerReading) -> bool:
    """Whether `reading` is of another server than `last`: another container (a pod made
    again under its name, whose volume may still hold the old postmaster.pid) or another
    postmaster (a restart)."""
    container = reading.container is not None and last.container is not None
    if container and reading.container != last.container:
        return True
    return reading.server is not None and last.server is not None and reading.server != last.server


class ServerReplaced(RuntimeError):
    """A reading found another server than the first (its pod made again, or it was started
    again): counters are never compared across servers."""


class ContainerServerSampler(PeriodicSampler):
    """The same figures as ServerIoSampler, and the container's CPU, for a server in a
    container whose counters the host reads (a pod's, by exec): its own cgroup (I/O per
    device, CPU and throttling) and /proc/PID/io of its processes.

    When a reading finds another server (a pod made again under its name, a restart), the
    figures go on from there: each server's gains are summed and no interval spans two
    servers (the outage is a gap); with `one_server` the reading raises ServerReplaced
    instead, for a caller that starts a new sampler on the new pod (samplers/instances.py)."""

    name = "serverio"

    def __init__(
        self, counters: ServerCounters, role_devices: dict[str, str], *, one_server: bool = False
    ) -> None:
        super().__init__()
        self.counters = counters
        self.role_devices = role_devices
        self.one_server = one_server
        self.numbers: dict[str, str] = {}
        self.processes: ProcessIo | None = None
        self.proc_before: dict[str, int] = {}  # what earlier servers' processes did
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
        last = self.readings[-1] if self.readings else None
        if last is not None and replaced(last, reading):
            if self.one_server:
                was, now = (
                    _named(last.server, last.container),
                    _named(reading.server, reading.container),
                )
                raise ServerReplaced(f"another server ({was} before, {now} now)")
            if reading.postmaster is None:
                return  # a new container whose server has not started: a gap, read again
            self.proc_before = last.proc
            self.processes = None
        if self.processes is None:
            if reading.postmaster is None:
                raise RuntimeError("the server is not running")
            self.processes = ProcessIo(reading.postmaster)
            self.processes.update(reading.processes, first=True)
        else:
            self.processes.update(reading.processes)
        totals = self.processes.totals()
        proc = {k: self.proc_before.get(k, 0) + v for k, v in totals.items()}
        known = last.identity if last is not None else (None, None)
        self.readings.append(
            ContainerReading(
                t, reading, proc, reading.server or known[0], reading.container or known[1]
            )
        )

    def tick(self, t: float) -> None:
        self._read(t)

    def _servers(self) -> list[tuple[ContainerReading, ContainerReading]]:
        """The first and last reading of each server read, in order."""
        spans: list[tuple[ContainerReading, ContainerReading]] = []
        for one in self.readings:
            if spans and spans[-1][1].identity == one.identity:
                spans[-1] = (spans[-1][0], one)
            else:
                spans.append((one, one))
        return spans

    def result(self) -> SamplerResult:
        out = SamplerResult()
        io: dict[str, JSONValue] = {
            "source": self.counters.source,
            "cgroup": self.counters.cgroup,
            "note": self.counters.note,
        }
        cpu: dict[str, JSONValue] = {"source": self.counters.source}
        if len(self.readings) >= 2:
            spans = self._servers()
            seconds = self.readings[-1].t - self.readings[0].t
            io["seconds"] = cpu["seconds"] = round(seconds, 3)
            if len(spans) > 1:
                io["servers"] = len(spans)
            io["proc"] = dict(self.readings[-1].proc)
            io["cgroup_total"] = summed_deltas(
                (summed_fields(a.reading.io), summed_fields(b.reading.io)) for a, b in spans
            )
            io["roles"] = {
                role: summed_deltas(
                    (a.reading.io.get(num, {}), b.reading.io.get(num, {})) for a, b in spans
                )
                for role, num in self.numbers.items()
            }
            cpu.update(spans_cpu_usage(spans))
            out.series.update(self._series())
        out.sections["io"] = {"postgres": io}
        out.sections["cpu"] = {"server_container": cpu}
        return out

    def _series(self) -> dict[str, list[Sample]]:
        series: dict[str, list[Sample]] = {}
        for a, b in itertools.pairwise(self.readings):
            seconds = b.t - a.t
            if seconds <= 0 or a.identity != b.identity:
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


def summed_deltas(pairs: Iterable[tuple[dict[str, int], dict[str, int]]]) -> dict[str, int]:
    """counter_delta of each (first, last) pair, summed: one pair per server read."""
    total = dict.fromkeys(FIELDS, 0)
    for a, b in pairs:
        for k, v in counter_delta(a, b).items():
            total[k] += v
    return total


def spans_cpu_usage(spans: list[tuple[ContainerReading, ContainerReading]]) -> dict[str, JSONValue]:
    """cpu_usage of what each server's span gained, summed, over the time the spans cover
    (one span: cpu_usage of its first and last reading)."""
    total: dict[str, int | None] = {}
    for name in (f.name for f in fields(ContainerCpu)):
        gained: int | None = 0
        for first, last in spans:
            x, y = getattr(first.reading.cpu, name), getattr(last.reading.cpu, name)
            if x is None or y is None or gained is None:
                gained = None
            else:  # as cpu_usage counts them: times never negative, periods as they are
                gained += max(0, y - x) if name.endswith("_ns") else y - x
        total[name] = gained
    zero = ContainerCpu(**{k: None if v is None else 0 for k, v in total.items()})
    return cpu_usage(zero, ContainerCpu(**total), sum(b.t - a.t for a, b in spans))
