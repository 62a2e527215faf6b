"""CPU and memory of the machine (/proc/stat, /proc/meminfo) and the CPU the load generator
itself used (/proc/PID/stat and its threads).

Parsers and the per-interval arithmetic are pure; `CpuSampler` reads the files each tick,
through the target's host when it has one (a pod's: the node's /proc/stat, by exec), and the
load generator's /proc/PID files only where its PID is a process of this machine.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from howfast.model import JSONValue, Sample
from howfast.samplers.base import PeriodicSampler, SamplerContext, SamplerResult
from howfast.samplers.plugin import SamplerPlugin, SamplerSetup

if TYPE_CHECKING:
    from howfast.hosts.base import Host

PROC = Path("/proc")
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class CpuTimes:
    """The machine's CPU time in ticks, all CPUs together (the `cpu` line of /proc/stat)."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    @property
    def total(self) -> int:
        # guest time is already inside user and nice: not added again
        return (
            self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
        )


def parse_stat(text: str) -> CpuTimes:
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(v) for v in fields[1:9]]
            values += [0] * (8 - len(values))  # very old kernels lack steal
            return CpuTimes(*values)
    raise ValueError("no cpu line in /proc/stat")


# Shares of all CPUs' time, in percent; the name is `cpu.<share>_pct`.
CPU_SHARES = ("user", "system", "iowait", "steal", "idle")


def cpu_shares(before: CpuTimes, after: CpuTimes) -> dict[str, float] | None:
    """Percent of all CPUs' time spent in each state between two readings; None when no
    tick passed. user includes nice; system includes interrupt handling."""
    total = after.total - before.total
    if total <= 0:
        return None

    def pct(*names: str) -> float:
        ticks = sum(int(getattr(after, n)) - int(getattr(before, n)) for n in names)
        return 100.0 * ticks / total

    return {
        "user": pct("user", "nice"),
        "system": pct("system", "irq", "softirq"),
        "iowait": pct("iowait"),
        "steal": pct("steal"),
        "idle": pct("idle"),
    }


def parse_meminfo(text: str) -> dict[str, int]:
    """Field -> bytes ('Cached: 487140 kB' -> 498831360)."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            scale = 1024 if len(parts) > 1 and parts[1] == "kB" else 1
            values[name.strip()] = int(parts[0]) * scale
    return values


def page_cache_bytes(meminfo: dict[str, int]) -> int | None:
    """File pages in memory: Cached without shared memory (tmpfs, PostgreSQL's own
    shared_buffers when they are System V/POSIX shared memory), which is not a cache of
    any disk."""
    if "Cached" not in meminfo:
        return None
    return max(0, meminfo["Cached"] - meminfo.get("Shmem", 0))


def parse_pid_stat(text: str) -> int:
    """utime + stime in ticks from /proc/PID/stat. The command name (in parentheses) may
    hold spaces and parentheses, so fields are counted from the last ')'."""
    after = text[text.rindex(")") + 2 :].split()
    # after[0] is field 3 (state); utime and stime are fields 14 and 15
    return int(after[11]) + int(after[12])


def process_cpu_ticks(pid: int, proc: Path = PROC) -> tuple[int, dict[int, int]] | None:
    """(ticks of the whole process, ticks of each thread); None once it has exited."""
    try:
        total = parse_pid_stat((proc / str(pid) / "stat").read_text())
        threads = {}
        for task in (proc / str(pid) / "task").iterdir():
            try:
                threads[int(task.name)] = parse_pid_stat((task / "stat").read_text())
            except (OSError, ValueError):
                continue  # a thread that just ended
        return total, threads
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class ProcessReading:
    t: float
    total: int
    threads: dict[int, int]


def process_usage(readings: list[ProcessReading], ticks_per_s: int = CLK_TCK) -> dict[str, float]:
    """Mean CPU of the process over its readings, in percent of one core, and the busiest
    thread's: one thread can use at most one core, so a thread near 100% is the limit."""
    if len(readings) < 2:
        return {}
    first, last = readings[0], readings[-1]
    seconds = last.t - first.t
    if seconds <= 0:
        return {}
    # A thread started after the first reading spent all its CPU time within the window.
    busiest = max(
        (
            (ticks - first.threads.get(tid, 0)) / ticks_per_s / seconds * 100
            for tid, ticks in last.threads.items()
        ),
        default=0.0,
    )
    return {
        "cpu_pct": (last.total - first.total) / ticks_per_s / seconds * 100,
        "busiest_thread_pct": busiest,
        "seconds": seconds,
    }


class CpuSampler(PeriodicSampler):
    """Machine CPU shares, page cache and dirty memory, and the load generator's CPU."""

    name = "cpu"

    def __init__(self, proc: Path = PROC, host: Host | None = None) -> None:
        super().__init__()
        self.proc = proc
        # A host reads /proc/stat and /proc/meminfo where the server runs (a pod: the node's,
        # by exec); the load generator's PIDs are read here only when the host says they
        # are this machine's processes.
        self.host = host
        self.source = host.proc_source("stat") if host else str(proc / "stat")
        self.process_note = host.process_cpu_note() if host else None
        self.ctx: SamplerContext | None = None
        self.cpu: list[tuple[float, CpuTimes]] = []
        self.memory: list[tuple[float, dict[str, int]]] = []
        self.processes: dict[int, list[ProcessReading]] = {}

    def begin(self, ctx: SamplerContext) -> None:
        self.ctx = ctx
        self.tick(ctx.now())

    def _read(self) -> dict[str, str]:
        if self.host is None:
            return {name: (self.proc / name).read_text() for name in ("stat", "meminfo")}
        return self.host.read_proc("stat", "meminfo")

    def tick(self, t: float) -> None:
        texts = self._read()
        self.cpu.append((t, parse_stat(texts["stat"])))
        self.memory.append((t, parse_meminfo(texts["meminfo"])))
        assert self.ctx is not None
        if self.process_note is not None:
            return
        for pid, first in self.ctx.processes.current().items():
            got = process_cpu_ticks(pid, self.proc)
            if got is None:
                continue  # it has exited
            readings = self.processes.setdefault(pid, [])
            if not readings and isinstance(first, ProcessReading):
                readings.append(first)
            readings.append(ProcessReading(t, *got))

    def result(self) -> SamplerResult:
        out = SamplerResult()
        shares: dict[str, list[Sample]] = {name: [] for name in CPU_SHARES}
        for (_, a), (t, b) in itertools.pairwise(self.cpu):
            got = cpu_shares(a, b)
            for name, value in (got or {}).items():
                shares[name].append(Sample(round(t, 3), value))
        for name, points in shares.items():
            if points:
                out.series[f"cpu.{name}_pct"] = points
        cache = [
            Sample(round(t, 3), float(v))
            for t, m in self.memory
            if (v := page_cache_bytes(m)) is not None
        ]
        dirty = [Sample(round(t, 3), float(m["Dirty"])) for t, m in self.memory if "Dirty" in m]
        if cache:
            out.series["mem.page_cache_bytes"] = cache
        if dirty:
            out.series["mem.dirty_bytes"] = dirty
        section: dict[str, JSONValue] = {}
        if len(self.cpu) >= 2:
            whole = cpu_shares(self.cpu[0][1], self.cpu[-1][1])
            if whole:
                section.update({f"{k}_pct": round(v, 2) for k, v in whole.items()})
        if self.memory:
            first, last = self.memory[0][1], self.memory[-1][1]
            section["page_cache_bytes_start"] = page_cache_bytes(first)
            section["page_cache_bytes_end"] = page_cache_bytes(last)
            section["memory_total_bytes"] = last.get("MemTotal")
            section["dirty_bytes_max"] = int(max(p.value for p in dirty)) if dirty else None
        load = self._load_generator(out)
        if load:
            section["load_generator"] = load
        if self.process_note:
            section["load_generator_note"] = self.process_note
        section["source"] = self.source
        out.sections["cpu"] = section
        return out

    def _load_generator(self, out: SamplerResult) -> dict[str, JSONValue] | None:
        """The busiest tracked process (pgbench): its mean CPU and per-interval series."""
        best: tuple[float, int, dict[str, float]] | None = None
        for pid, readings in self.processes.items():
            usage = process_usage(readings)
            if usage and (best is None or usage["cpu_pct"] > best[0]):
                best = (usage["cpu_pct"], pid, usage)
        if best is None:
            return None
        _, pid, usage = best
        readings = self.processes[pid]
        out.series["pgbench.cpu_pct"] = [
            Sample(round(b.t, 3), (b.total - a.total) / CLK_TCK / (b.t - a.t) * 100)
            for a, b in itertools.pairwise(readings)
            if b.t > a.t
        ]
        return {
            "pid": pid,
            "cpu_pct": round(usage["cpu_pct"], 2),
            "busiest_thread_pct": round(usage["busiest_thread_pct"], 2),
            "threads": len(readings[-1].threads),
            "seconds": round(usage["seconds"], 3),
        }


def first_reading(pid: int, t: float, proc: Path = PROC) -> ProcessReading | None:
    """A process's CPU as soon as it is known, so its first second is not lost."""
    got = process_cpu_ticks(pid, proc)
    return ProcessReading(t, *got) if got is not None else None


def _create(setup: SamplerSetup) -> CpuSampler:
    return CpuSampler(host=setup.host)


# Every sampled step: CPU, page cache and the load generator's CPU (samplers/registry.py).
SAMPLER = SamplerPlugin("cpu", _create, order=10, sections=("cpu",))
