"""PostgreSQL's own I/O during a step: its I/O cgroup's counters per device, and /proc/PID/io of
its processes, beside the whole device's counters of the diskstats sampler.

For a server howfast started on this machine (`Target.server_io()`; see machine/serverio.py
for where the figures come from and what each source misses), and, as ContainerServerSampler
(container_io.py), for a server in a pod: its container's own cgroup (I/O, CPU and
throttling) and processes, read through the host (`Host.server_counters()`, by exec;
docs/kubernetes.md).

/proc/PID/io of the postmaster includes what its children did once they exited (the kernel
adds a reaped child's counters to its parent's), so the step's bytes are

    postmaster's gain + live children's gain - what children gone since the start had done
    before it

which counts backends that came and went between two readings.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from howfast.machine.serverio import FIELDS, ServerIo, device_numbers, parse_proc_io
from howfast.model import JSONValue, Sample
from howfast.samplers.base import PeriodicSampler, SamplerContext, SamplerResult
from howfast.samplers.container_io import ContainerServerSampler
from howfast.samplers.plugin import SamplerPlugin, SamplerSetup
from howfast.samplers.server_figures import (
    ProcessIo,
    add_proc_rates,
    add_role_rates,
    counter_delta,
)
from howfast.targets.capabilities import HasLocalServer

PROC = Path("/proc")


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


def role_counters(
    cgroup: dict[str, dict[str, int]], numbers: dict[str, str]
) -> dict[str, dict[str, int]]:
    """The cgroup's counters of each role's device (role -> MAJ:MIN given in `numbers`)."""
    return {role: dict(cgroup.get(num, dict.fromkeys(FIELDS, 0))) for role, num in numbers.items()}


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


def _create(setup: SamplerSetup) -> PeriodicSampler | None:
    target = setup.target
    source = target.server_io() if isinstance(target, HasLocalServer) else None
    if source is not None:
        return ServerIoSampler(source, setup.role_devices)
    counters = setup.host.server_counters() if setup.host is not None else None
    return ContainerServerSampler(counters, setup.role_devices) if counters else None


# Every sampled step on a server howfast started here, or in a pod (samplers/registry.py).
SAMPLER = SamplerPlugin("serverio", _create, order=25, sections=("io", "cpu"))
