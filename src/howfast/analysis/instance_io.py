"""(issue 37) The WAL and data I/O of every instance of an operator-run design (`cnpg://`),
per step: what samplers/instances.py stored in `io.instances.<name>` (each instance's own
cgroup counters of its WAL volume's device and its data volume's device), summed over the
pods an instance had during the step (a pod made again by the operator is a reading of its
own). Pure: formats nothing (report/instance_io_view.py does)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from howfast.model import JSONValue, RunRecord, StepRecord

WAL_OWN = "own device"  # read apart from the data volume's
WAL_IN_PGDATA = "in PGDATA"  # no WAL volume: its writes are the data volume's
WAL_SHARED_DEVICE = "data's device"  # a WAL volume, on the data volume's device: read as one


@dataclass(frozen=True)
class RoleIo:
    """Bytes one volume role's device moved during the step, over `seconds` of readings."""

    read_bytes: int
    write_bytes: int
    seconds: float

    def write_mbps(self) -> float | None:
        return self.write_bytes / 1e6 / self.seconds if self.seconds > 0 else None


@dataclass(frozen=True)
class InstanceIoRow:
    target: str
    step_id: int | None
    instance: str
    primary: bool  # the design's primary when the run started
    pods: int  # readings: more than 1 when its pod was made again within the step
    data: RoleIo | None
    wal: RoleIo | None  # None: no WAL device of its own to read (see `wal_where`)
    wal_where: str  # WAL_OWN, WAL_IN_PGDATA or WAL_SHARED_DEVICE


def _num(value: JSONValue | None) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _readings(section: JSONValue) -> list[Mapping[str, JSONValue]]:
    """One instance's section: a reading, or {"pods": [reading or None, ...]}."""
    if not isinstance(section, dict):
        return []
    pods = section.get("pods")
    if isinstance(pods, list):
        return [p for p in pods if isinstance(p, dict)]
    return [section]


def _role(readings: list[Mapping[str, JSONValue]], role: str) -> RoleIo | None:
    read = write = 0
    seconds = 0.0
    seen = False
    for reading in readings:
        roles = reading.get("roles")
        counters = roles.get(role) if isinstance(roles, dict) else None
        if not isinstance(counters, dict):
            continue
        seen = True
        read += int(_num(counters.get("read_bytes")))
        write += int(_num(counters.get("write_bytes")))
        seconds += _num(reading.get("seconds"))
    return RoleIo(read, write, round(seconds, 3)) if seen else None


def _design(run: RunRecord, target: str) -> Mapping[str, JSONValue]:
    for record in run.targets:
        if record.name == target:
            cnpg = (record.device or {}).get("cnpg")
            return cnpg if isinstance(cnpg, dict) else {}
    return {}


def step_rows(run: RunRecord, step: StepRecord) -> list[InstanceIoRow]:
    io = step.sections.get("io")
    instances = io.get("instances") if isinstance(io, dict) else None
    if not isinstance(instances, dict):
        return []
    design = _design(run, step.target)
    wal_volume = design.get("wal_on_data_volume") is False
    rows = []
    for name, section in sorted(instances.items()):
        readings = _readings(section)
        wal = _role(readings, "wal")
        if wal is not None:
            where = WAL_OWN
        elif wal_volume:
            where = WAL_SHARED_DEVICE
        else:
            where = WAL_IN_PGDATA
        rows.append(
            InstanceIoRow(
                target=step.target,
                step_id=step.id,
                instance=str(name),
                primary=design.get("primary") == name,
                pods=len(readings),
                data=_role(readings, "data"),
                wal=wal,
                wal_where=where,
            )
        )
    return rows


def instance_io_rows(run: RunRecord) -> list[InstanceIoRow]:
    """Every sampled step's instances, in step order; [] for a run with none (not cnpg)."""
    return [row for step in run.steps for row in step_rows(run, step)]
