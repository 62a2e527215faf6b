"""How much memory PostgreSQL can use here: the basis on which datasets are sized.

The `--memory` cap when there is one; else the machine's RAM, lowered to the memory limit of
the cgroup howfast runs in (a container's limit), since the server howfast starts inherits it.
Parsers and the choice are pure; `memory_basis` reads the files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from howfast.machine.cgroup import CGROUP_ROOT, parse_proc_cgroup
from howfast.units import human_bytes

# cgroup v1 spells "no limit" as a number near 2**63; anything this large is no limit.
NO_LIMIT = 1 << 60


@dataclass(frozen=True)
class MemoryBasis:
    bytes: int
    source: str  # "--memory", "cgroup" (the limit howfast runs under) or "ram"

    def describe(self) -> str:
        what = {"--memory": "the --memory cap", "cgroup": "the cgroup limit howfast runs under"}
        return f"{human_bytes(self.bytes)} ({what.get(self.source, 'RAM')})"


def parse_limit(text: str) -> int | None:
    """memory.max / memory.limit_in_bytes content -> bytes, None when unlimited."""
    text = text.strip()
    if not text or text == "max" or not text.isdigit():
        return None
    value = int(text)
    return value if value < NO_LIMIT else None


def v1_hierarchical_limit(memory_stat: str) -> int | None:
    """The limit in force for a v1 memory cgroup, its ancestors' included (memory.stat)."""
    for line in memory_stat.splitlines():
        name, _, value = line.partition(" ")
        if name == "hierarchical_memory_limit":
            return parse_limit(value)
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def inherited_limit_bytes(root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> int | None:
    """The memory limit of the cgroup this process runs in (ancestors included), if any."""
    if proc_cgroup is None:
        proc_cgroup = _read(Path("/proc/self/cgroup")) or ""
    own = parse_proc_cgroup(proc_cgroup)
    if (root / "cgroup.controllers").exists():
        limits = []
        group = root / own.get("", "/").lstrip("/")
        while group != root and root in group.parents:
            text = _read(group / "memory.max")
            limit = parse_limit(text) if text else None
            if limit is not None:
                limits.append(limit)
            group = group.parent
        return min(limits) if limits else None
    group = root / "memory" / own.get("memory", "/").lstrip("/")
    if not group.is_dir():  # a cgroup namespace: our own cgroup is the mount's root
        group = root / "memory"
    stat = _read(group / "memory.stat")
    return v1_hierarchical_limit(stat) if stat else None


def choose_basis(cap: int | None, ram: int | None, inherited: int | None) -> MemoryBasis | None:
    if cap is not None:
        return MemoryBasis(cap, "--memory")
    if inherited is not None and (ram is None or inherited < ram):
        return MemoryBasis(inherited, "cgroup")
    return MemoryBasis(ram, "ram") if ram is not None else None


def mem_total_bytes(meminfo: str) -> int | None:
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def memory_basis(cap: int | None) -> MemoryBasis | None:
    ram = mem_total_bytes(_read(Path("/proc/meminfo")) or "")
    return choose_basis(cap, ram, None if cap is not None else inherited_limit_bytes())


_PG_UNITS = {"B": 1, "kB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}


def pg_memory_bytes(value: str, unit_bytes: int = 8192) -> int | None:
    """A postgresql.conf memory setting ('128MB', '16384' in 8 kB pages) in bytes; None when
    it is not one (the server will say what is wrong with it)."""
    text = value.strip()
    number = text.rstrip("kBMGT").strip()
    unit = text[len(number) :].strip() if number else ""
    if not number.isdigit() or (unit and unit not in _PG_UNITS):
        return None
    return int(number) * (_PG_UNITS[unit] if unit else unit_bytes)


# Memory the server needs outside the page cache under a --memory cap, besides its settings'.
MEMORY_HEADROOM = 32 * 1024**2


def cap_problem(limit: int, settings: dict[str, str]) -> str | None:
    """Why a --memory cap is too small for the server's settings, or None. It must hold
    shared_buffers (shared memory is charged to the cgroup), one maintenance_work_mem (the
    index builds of pgbench-init sort in it) and the backends' own memory; else the
    kernel's OOM killer ends a backend mid-step."""
    shared = pg_memory_bytes(settings.get("shared_buffers", "128MB")) or 0
    maintenance = pg_memory_bytes(settings.get("maintenance_work_mem", "64MB"), 1024) or 0
    need = shared + maintenance + MEMORY_HEADROOM
    if limit >= need:
        return None
    return (
        f"--memory {human_bytes(limit)} is too small for shared_buffers "
        f"({human_bytes(shared)}) + maintenance_work_mem ({human_bytes(maintenance)}) + "
        f"{human_bytes(MEMORY_HEADROOM)} for the server's processes: at least "
        f"{human_bytes(need)}"
    )


# The smallest --memory that can hold a server: shared_buffers and maintenance_work_mem at
# 16 MB and 8 MB (what cap_problem suggests) with MEMORY_HEADROOM for the processes.
MIN_MEMORY_CAP = 64 * 1024**2


def cap_floor_problem(limit: int, option: str) -> str | None:
    """Why a memory cap is absurdly small whatever the settings (`--memory 1KiB`), or None."""
    if limit >= MIN_MEMORY_CAP:
        return None
    return (
        f"{option} {human_bytes(limit)} is too small: a PostgreSQL server needs at least "
        f"{human_bytes(MIN_MEMORY_CAP)} (with shared_buffers=16MB, maintenance_work_mem=8MB)"
    )


# Settings that size the shared memory the server maps when it starts, and their units
# when written without one. Memory it cannot map (or, where the kernel overcommits, touch)
# makes the start fail, or take minutes and then fail.
SHARED_MEMORY_SETTINGS = {
    "shared_buffers": 8192,
    "wal_buffers": 8192,
    "min_dynamic_shared_memory": 1024**2,
}


def shared_memory_problem(name: str, value: str, basis: MemoryBasis) -> str | None:
    """Why a setting asks for more shared memory than the server can have here, or None."""
    unit = SHARED_MEMORY_SETTINGS.get(name.lower())
    size = pg_memory_bytes(value, unit) if unit else None
    if size is None or size + MEMORY_HEADROOM <= basis.bytes:
        return None
    return (
        f"{name} = {value} ({human_bytes(size)}) does not fit in the memory the server can "
        f"have here: {basis.describe()}, of which {human_bytes(MEMORY_HEADROOM)} is kept for "
        "its processes"
    )
