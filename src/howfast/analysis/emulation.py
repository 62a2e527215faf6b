"""Emulated volumes: whether the latency a volume really added is the one that was asked
(docs/emulated-storage.md). Pure; the target records both, this says what they mean."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from howfast.model import JSONValue, RunRecord
from howfast.plugin.registry import find

MISMATCH = 0.25  # warn when the measured added latency is this far from the asked one
SLACK_MS = 0.1  # and more than this: small figures scatter


def latency_warning(asked_ms: float, added_ms: float) -> str | None:
    """Asked vs measured added latency per 4 KiB write at queue depth 1."""
    if abs(added_ms - asked_ms) <= max(MISMATCH * asked_ms, SLACK_MS):
        return None
    if not asked_ms:
        return f"the emulated volume added {added_ms:.2f} ms per write where none was asked"
    return (
        f"the emulated volume added {added_ms:.2f} ms per 4 KiB write at queue depth 1, "
        f"{added_ms / asked_ms - 1:+.0%} off the {asked_ms:g} ms asked"
    )


def emulation_warning(device: Mapping[str, JSONValue]) -> str | None:
    """The warning for a target's `device.emulation` record, when it has both figures."""
    emulation = device.get("emulation")
    if not isinstance(emulation, dict):
        return None
    asked = emulation.get("asked_latency_ms")
    added = emulation.get("measured_added_latency_ms")
    if not isinstance(asked, int | float) or not isinstance(added, int | float):
        return None
    return latency_warning(float(asked), float(added))


@dataclass(frozen=True)
class SweepPoint:
    """One pgbench test on one emulated-volume variant."""

    test: str  # "pgbench tpcb-like, 16 clients"
    asked_ms: float
    measured_ms: float | None
    iops: int | None
    tps: float | None
    p99_ms: float | None


def latency_sweep(run: RunRecord) -> list[SweepPoint]:
    """Throughput (TPS) and p99 of each full-speed test (pgbench's) against the latency its
    volume added: the "latency, not IOPS" curve. Empty unless at least two targets are
    emulated volumes."""
    emulated = {}
    for target in run.targets:
        record = target.device.get("emulation")
        if isinstance(record, dict) and isinstance(record.get("asked_latency_ms"), int | float):
            emulated[target.name] = record
    if len(emulated) < 2:
        return []
    points = []
    for step in run.steps:
        p = step.all_params
        record = emulated.get(step.target)
        plugin = find(step.workload)
        if record is None or plugin is None or step.status != "completed":
            continue
        # Full-speed steps of a workload with a throughput only: a fixed rate is the rate's,
        # not the volume's.
        if plugin.throughput_metric is None or not plugin.full_speed(p):
            continue
        limits = record.get("io_limits")
        iops = None
        if isinstance(limits, dict):
            line = limits.get("blkio.throttle.write_iops_device") or limits.get("io.max")
            iops = _iops_of(str(line)) if line else None
        measured = record.get("measured_added_latency_ms")
        tps = step.metrics.get(plugin.throughput_metric)
        p99 = step.metrics.get("latency_p99_ms")
        points.append(
            SweepPoint(
                plugin.fleet_label(p),
                float(record["asked_latency_ms"]),
                float(measured) if isinstance(measured, int | float) else None,
                iops,
                float(tps) if isinstance(tps, int | float) else None,
                float(p99) if isinstance(p99, int | float) else None,
            )
        )
    return sorted(points, key=lambda x: (x.test, x.iops or 0, x.asked_ms))


def _iops_of(line: str) -> int | None:
    """The write IOPS in '7:0 200' (v1) or '7:0 riops=.. wiops=200 ..' (v2)."""
    for field in line.split()[1:]:
        value = field.split("=", 1)[1] if field.startswith("wiops=") else field
        if value.isdigit():
            return int(value)
    return None
