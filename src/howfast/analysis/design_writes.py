"""The bytes a design with standbys wrote (issue 28, docs/replication.md): the primary's own
writes plus each standby's, derived when a run is read from what the samplers stored.

Each standby is counted once, from one of two sources:

- **its device** (`io.roles.<standby>`, the disk sampler's counters of the device its data
  directory is on), when that device is its own: sampled under its name, and no other role
  of the step (the primary's data or WAL, another standby) on it. That is what its volume
  wrote, the filesystem's journal and metadata included: an emulated volume
  (`standby_latency=`) or a `standby_dir` on another disk.
- **its processes** (`io.standbys.<standby>`: its I/O cgroup, else /proc/PID/io) otherwise:
  on the primary's device (the default, inside the primary's cluster directory) the device's
  counters are the primary's and the standby's together, and counting them again would count
  the primary twice.

A device that wrote more than OTHERS_FACTOR times what the standby itself wrote, and at
least OTHERS_MIN_BYTES more, had another writer (a `standby_dir` on a shared disk): then the
standby's own figure is taken, with a warning. The primary is always counted by its own
writes (`pg_write_bytes`). Pure functions of a stored step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from howfast.analysis.own_io import OTHERS_FACTOR, OTHERS_MIN_BYTES, attribute_io
from howfast.diskcounters import SECTOR
from howfast.model import JSONValue, StepRecord


@dataclass(frozen=True)
class DesignWrites:
    metrics: dict[str, JSONValue] = field(default_factory=dict)
    # standby -> {"write_bytes", "source": "device" | "processes", "device", "why"}
    standbys: dict[str, JSONValue] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def standby_role_names(roles: Mapping[str, Any]) -> list[str]:
    """The roles that are standbys' data directories (`standby` names them)."""
    return [name for name, info in roles.items() if _mapping(info).get("standby")]


def own_device(roles: Mapping[str, Any], standby: str) -> tuple[str | None, int | None, str]:
    """(device, bytes it wrote, why not) for a standby's role: the device and its bytes when
    the device is the standby's alone, else None and why its figures are not the standby's."""
    info = _mapping(roles.get(standby))
    if not info.get("standby"):
        return None, None, "its device was not sampled"
    device = info.get("device")
    if not device:
        return None, None, "no block device behind its data directory"
    shared = info.get("same_device_as")
    if shared:
        return None, None, f"on the device of {shared} ({device})"
    others = [n for n, i in roles.items() if _mapping(i).get("same_device_as") == standby]
    if others:
        return None, None, f"{', '.join(others)} on its device ({device}) too"
    sectors = _mapping(info.get("delta")).get("sectors_written")
    if not isinstance(sectors, int):
        return None, None, f"its device ({device}) was not read twice"
    return str(device), sectors * SECTOR, ""


def _own_writes(section: object) -> int | None:
    """What a standby's processes wrote (its cgroup, else /proc/PID/io), as the primary's."""
    if not isinstance(section, Mapping):
        return None
    found = attribute_io({"postgres": section}, None, {})
    value = found.metrics.get("pg_write_bytes") if found is not None else None
    return value if isinstance(value, int) else None


def _someone_else(device_bytes: int, own_bytes: int) -> bool:
    """The device wrote much more than the standby: another writer shares it."""
    return device_bytes > OTHERS_FACTOR * own_bytes and device_bytes - own_bytes >= OTHERS_MIN_BYTES


def standby_writes(
    roles: Mapping[str, Any], sections: Mapping[str, Any]
) -> tuple[dict[str, JSONValue], list[str]] | None:
    """Per standby: what it wrote and from which source; None when one is unaccounted for
    (no total rather than a wrong one). `sections`: `io.standbys`."""
    names = sorted(set(sections) | set(standby_role_names(roles)))
    out: dict[str, JSONValue] = {}
    warnings: list[str] = []
    for name in names:
        own = _own_writes(sections.get(name))
        device, written, why = own_device(roles, name)
        if device is not None and written is not None:
            if own is not None and _someone_else(written, own):
                why = (
                    f"its device ({device}) wrote {written} bytes, the standby itself {own}: "
                    "something else wrote there"
                )
                warnings.append(
                    f"{name}: {why}; the design's bytes written count the standby's own writes"
                )
            else:
                out[name] = {"write_bytes": written, "source": "device", "device": device}
                continue
        if own is None:
            return None
        out[name] = {"write_bytes": own, "source": "processes", "why": why}
    return out, warnings


def design_writes(step: StepRecord) -> DesignWrites:
    """`standby_write_bytes` (the standbys, each from its source), `design_write_bytes`
    (the primary's own `pg_write_bytes` plus those) and per transaction; nothing without
    standbys or with one unaccounted for."""
    io = _mapping(step.sections.get("io"))
    found = standby_writes(_mapping(io.get("roles")), _mapping(io.get("standbys")))
    if not found or not found[0]:
        return DesignWrites()
    standbys, warnings = found
    written = sum(int(_mapping(s)["write_bytes"]) for s in standbys.values())
    metrics: dict[str, JSONValue] = {"standby_write_bytes": written}
    primary = step.metrics.get("pg_write_bytes")
    if isinstance(primary, int):
        metrics["design_write_bytes"] = primary + written
        transactions = step.metrics.get("transactions")
        if isinstance(transactions, int | float) and transactions > 0:
            metrics["design_write_bytes_per_tx"] = round((primary + written) / transactions, 1)
    return DesignWrites(metrics, standbys, tuple(warnings))
