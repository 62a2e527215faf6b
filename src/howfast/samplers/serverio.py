"""PostgreSQL's own I/O during a step: its I/O cgroup's counters per device, and /proc/PID/io of
its processes, beside the whole device's counters of the diskstats sampler.

Only for a server howfast started on this machine (`Target.server_io()`); see
targets/serverio.py for where the figures come from and what each source misses.

/proc/PID/io of the postmaster includes what its children did once they exited (the kernel
adds a reaped child's counters to its parent's), so the step's bytes are

    postmaster's gain + live children's gain - what children gone since the start had done
    before it

which counts backends that came and went between two readings.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

from howfast.model import JSONValue, Sample
from howfast.samplers.base import PeriodicSampler, SamplerContext, SamplerResult
from howfast.samplers.registry import SamplerPlugin, SamplerSetup
from howfast.targets.serverio import FIELDS, ServerIo, device_numbers, parse_proc_io

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
            for role in b.roles:
                d = counter_delta(a.roles.get(role, {}), b.roles[role])
                for name, key, scale in (
                    ("read_mbps", "read_bytes", 1e6),
                    ("write_mbps", "write_bytes", 1e6),
                    ("read_iops", "read_ios", 1.0),
                    ("write_iops", "write_ios", 1.0),
                ):
                    series.setdefault(f"pgio.{role}.{name}", []).append(
                        Sample(t, d[key] / scale / seconds)
                    )
            for key in ("read_bytes", "write_bytes"):
                rate = max(0, b.proc[key] - a.proc[key]) / 1e6 / seconds
                name = f"pgio.proc.{key.split('_')[0]}_mbps"
                series.setdefault(name, []).append(Sample(t, rate))
        return series


def _create(setup: SamplerSetup) -> ServerIoSampler | None:
    source = setup.target.server_io()
    return ServerIoSampler(source, setup.role_devices) if source is not None else None


# Every sampled step on a server howfast started here (samplers/registry.py).
SAMPLER = SamplerPlugin("serverio", _create, order=25)
