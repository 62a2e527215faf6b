"""The arithmetic of a server's own I/O, shared by serverio.py (a server howfast started
here) and container_io.py (a server in a pod): counter deltas, rates between readings, and
the bytes of its processes (/proc/PID/io) as serverio.py's docstring explains."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from howfast.machine.serverio import FIELDS
from howfast.model import Sample

# Per-interval series of the cgroup's counters: name, counter, divisor.
IO_SERIES = (
    ("read_mbps", "read_bytes", 1e6),
    ("write_mbps", "write_bytes", 1e6),
    ("read_iops", "read_ios", 1.0),
    ("write_iops", "write_ios", 1.0),
)


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


def counter_delta(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: max(0, b.get(k, 0) - a.get(k, 0)) for k in FIELDS}


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


def summed_fields(io: dict[str, dict[str, int]]) -> dict[str, int]:
    total = dict.fromkeys(FIELDS, 0)
    for row in io.values():
        for k in FIELDS:
            total[k] += row.get(k, 0)
    return total
