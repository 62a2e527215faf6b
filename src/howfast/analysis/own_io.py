"""PostgreSQL's own I/O during a step, beside the device's: which source to believe, and
whether someone else used the disk. Pure functions of the server-I/O sampler's section
(`io.postgres`, samplers/serverio.py).

Two sources, each missing something:

- the server's **I/O cgroup** (v2 `io.stat`, v1 `blkio.throttle.*`): what reached the block
  layer, per device. cgroup v1 leaves out writeback by the kernel's flusher threads (charged
  to the root cgroup), and on Linux 6.10 and later counts nothing at all on a disk that never
  had a throttle rule (howfast turns that on: machine/cgroup.py `IoCgroup.count_on`);
- **/proc/PID/io** of the server's processes: bytes read from storage, and bytes of pages they
  dirtied (at the time of dirtying, so writeback that happens after the step is counted in
  it). No split by device, no IOPS.

The cgroup is the figure when it counted. It did not when the sampler says so, or when it read
nothing while the processes read or wrote at least MIN_PROC_BYTES: then /proc/PID/io is the
figure, with the reason, and there are no per-device figures. Nothing unknown becomes 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from howfast.model import JSONValue

OTHERS_FACTOR = 2.0  # the device did this many times PostgreSQL's I/O: someone else did
OTHERS_MIN_BYTES = 16 * 1024 * 1024  # and at least this much more
MIN_WAL_BYTES = 1 << 20  # below this, bytes written per WAL byte means nothing
MIN_PROC_BYTES = 1 << 20  # a cgroup at 0 while the processes did this much: not counting


@dataclass
class Attribution:
    metrics: dict[str, JSONValue] = field(default_factory=dict)
    section: dict[str, JSONValue] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _bytes(counters: Mapping[str, Any]) -> tuple[int | None, int | None]:
    return _int(counters.get("read_bytes")), _int(counters.get("write_bytes"))


def cgroup_problem(pg: Mapping[str, Any]) -> str | None:
    """Why the cgroup's figures cannot be taken as PostgreSQL's own I/O, or None when they
    can (or when there is no cgroup)."""
    cgroup = _mapping(pg.get("cgroup_total"))
    if not cgroup:
        return None
    if pg.get("cgroup_counting") is False:
        note = pg.get("note")
        return str(note) if note else "the I/O cgroup's counters could not be turned on"
    read, write = _bytes(cgroup)
    proc_read, proc_write = _bytes(_mapping(pg.get("proc")))
    proc_total = (proc_read or 0) + (proc_write or 0)
    if not read and not write and proc_total >= MIN_PROC_BYTES:
        return (
            f"the server's I/O cgroup counted nothing while its processes read "
            f"{_size(proc_read or 0)} and wrote {_size(proc_write or 0)} (/proc/PID/io): its "
            "counters were not counting (cgroup v1 on Linux 6.10 and later counts only on a "
            "disk that has had a throttle rule since boot)"
        )
    return None


def attribute_io(
    io: Mapping[str, Any], wal_bytes: int | None, device_metrics: Mapping[str, JSONValue]
) -> Attribution | None:
    """PostgreSQL's own I/O beside the device's; None when it was not sampled."""
    pg = io.get("postgres")
    if not isinstance(pg, Mapping) or not pg.get("seconds"):
        return None
    out = Attribution()
    seconds = float(pg["seconds"])
    problem = cgroup_problem(pg)
    cgroup = _mapping(pg.get("cgroup_total")) if problem is None else {}
    proc = _mapping(pg.get("proc"))
    source = cgroup or proc
    if problem is not None:
        out.section["pg_io_unknown"] = problem
        out.warnings.append(
            f"PostgreSQL's own I/O is taken from /proc/PID/io, without a split by device: {problem}"
        )
    for direction in ("read", "write"):
        value = _int(source.get(f"{direction}_bytes"))
        if value is None:
            continue
        out.metrics[f"pg_{direction}_bytes"] = value
        out.metrics[f"pg_{direction}_mbps"] = round(value / 1e6 / seconds, 3)
    if source:
        out.section["pg_io_source"] = "cgroup" if cgroup else "/proc/PID/io"
    roles = _mapping(pg.get("roles")) if cgroup else {}
    for role, counters in roles.items():
        if not isinstance(counters, Mapping):
            continue
        for direction in ("read", "write"):
            b, n = _int(counters.get(f"{direction}_bytes")), _int(counters.get(f"{direction}_ios"))
            if b is not None:
                out.metrics[f"pg_io_{role}_{direction}_bytes"] = b
            if n is not None:
                out.metrics[f"pg_io_{role}_{direction}_iops"] = round(n / seconds, 1)
    written = _int(out.metrics.get("pg_write_bytes"))
    if written is not None and wal_bytes and wal_bytes >= MIN_WAL_BYTES:
        amplification = round(written / wal_bytes, 3)
        out.metrics["pg_write_amplification"] = amplification
        out.section["write_amplification"] = amplification
    out.section.update({k: v for k, v in out.metrics.items() if k.startswith("pg_")})
    cgroup_v1 = str(pg.get("source", "")).startswith("cgroup v1")
    # The standbys' devices (issue 28) are theirs: the primary's own I/O says nothing of them.
    standby_roles = [r for r, i in _mapping(io.get("roles")).items() if _mapping(i).get("standby")]
    primary_device = {
        k: v
        for k, v in device_metrics.items()
        if not any(k.startswith(f"io_{r}_") for r in standby_roles)
    }
    out.warnings += others_warnings(out.metrics, roles, primary_device, proc, cgroup_v1)
    return out


def others_warnings(
    own: Mapping[str, JSONValue],
    roles: Mapping[str, Any],
    device: Mapping[str, JSONValue],
    proc: Mapping[str, Any],
    cgroup_v1: bool,
) -> list[str]:
    """The device did much more I/O than PostgreSQL: someone else used the disk.

    PostgreSQL's share is taken at its most generous, so that the warning never blames a
    neighbour for what the server caused: on cgroup v1, whose counters leave out the kernel's
    writeback of the server's pages, its writes are at least what /proc/PID/io says it
    dirtied."""
    warnings = []
    proc_write = _int(proc.get("write_bytes")) if cgroup_v1 else None
    for direction, verb in (("write", "wrote"), ("read", "read")):
        device_roles = {
            k[3 : -len(f"_{direction}_bytes")]: v
            for k, v in device.items()
            if k.startswith("io_") and k.endswith(f"_{direction}_bytes")
        }
        if roles:  # per device: the cgroup knows which device PostgreSQL used
            pairs = [
                (role, _int(dev), _int(own.get(f"pg_io_{role}_{direction}_bytes")))
                for role, dev in device_roles.items()
            ]
        else:
            total = sum(int(v) for v in device_roles.values() if isinstance(v, int | float))
            own_total = _int(own.get(f"pg_{direction}_bytes"))
            pairs = [("all", total if device_roles else None, own_total)]
        for role, dev_bytes, own_bytes in pairs:
            if dev_bytes is None or own_bytes is None:
                continue
            generous = own_bytes
            if direction == "write" and proc_write is not None:
                generous = max(own_bytes, proc_write)
            excess = dev_bytes - generous
            if dev_bytes > OTHERS_FACTOR * generous and excess >= OTHERS_MIN_BYTES:
                where = "the devices" if role == "all" else f"the {role} device"
                warnings.append(
                    f"{where} {verb} {_size(dev_bytes)} during the step, PostgreSQL itself "
                    f"{_size(own_bytes)} ({own_bytes / dev_bytes:.0%}): something else used "
                    f"the disk, so the device's figures (IOPS, MB/s, utilisation, "
                    f"io_write_amplification) are not this test's alone; PostgreSQL's own are "
                    f"pg_{direction}_bytes and pg_io_<role>_*"
                )
    return warnings


def _size(n: float) -> str:
    if n >= 1024**3:
        return f"{n / 1024**3:.2f} GiB"
    return f"{n / 1024**2:.1f} MiB"
