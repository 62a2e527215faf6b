"""The `fio` workload as a plan sees it: named job profiles on a file in the target's data
directory, one step per profile and repetition."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from howfast.metric import Metric
from howfast.model import JSONValue, StepRecord, StepSpec
from howfast.plugin.fields import Duration, Size, no_duplicates
from howfast.plugin.workload import ExpandContext, Program, StepFamily, StepModel, WorkloadPlugin
from howfast.units import format_bytes, quote, whole_seconds

# What every fio profile reports: throughput, and average and p99 latency per direction.
FIO_FIGURES = (
    "read_iops",
    "write_iops",
    "read_mbps",
    "write_mbps",
    "read_lat_avg_ms",
    "read_lat_p99_ms",
    "write_lat_avg_ms",
    "write_lat_p99_ms",
    "sync_lat_avg_ms",
    "sync_lat_p99_ms",
)
_PROFILE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


def _profile_name(name: str) -> str:
    if not _PROFILE_NAME.fullmatch(name):
        raise ValueError(
            f"{quote(name)} is not a fio profile name (lower-case letters, digits, - and _)"
        )
    return name


ProfileName = Annotated[str, AfterValidator(_profile_name)]


class FioStep(StepModel):
    """fio with named job profiles, on a file in the target's data directory."""

    workload: Literal["fio"]
    profiles: Annotated[list[ProfileName], Field(min_length=1)]
    size: Size = 64 * 1024**2
    runtime: Duration = 10.0

    @field_validator("profiles")
    @classmethod
    def _distinct(cls, values: list[str]) -> list[str]:
        return no_duplicates(values)

    @field_validator("size")
    @classmethod
    def _whole_blocks(cls, size: int) -> int:
        # The fio profiles use PostgreSQL's 8 KiB block; a partial block cannot be tested.
        if size % 8192:
            raise ValueError(f"must be a multiple of 8KiB (8192 bytes), got {size} bytes")
        return size

    @field_validator("runtime")
    @classmethod
    def _runtime_in_seconds(cls, seconds: float) -> float:
        return whole_seconds(seconds)


def _m(name: str, label: str, unit: str, higher: bool | None, digits: int) -> Metric:
    return Metric(name, label, unit, higher, digits)


def _number(value: JSONValue) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


OPS = ("read", "write")


def _iops(metrics: Mapping[str, JSONValue]) -> list[tuple[str, float | None]]:
    return [(op, _number(metrics.get(f"{op}_iops"))) for op in OPS]


def _bytes_per_second(metrics: Mapping[str, JSONValue]) -> list[tuple[str, float | None]]:
    out: list[tuple[str, float | None]] = []
    for op in OPS:
        mbps = _number(metrics.get(f"{op}_mbps"))
        out.append((op, mbps * 1e6 if mbps is not None else None))
    return out


class FioPlugin(WorkloadPlugin[FioStep]):
    name = "fio"
    model = FioStep
    order = 30
    executor_class = "howfast.workloads.fio.workload:FioWorkload"
    analysis = "howfast.workloads.fio.analysis:ANALYSIS"
    report = "howfast.workloads.fio.report:REPORT"
    importer = "howfast.workloads.fio.imports:IMPORTER"
    # The job: profile and file as planned; fio's job options (imported output, or resolved:
    # direct, ioengine)
    test_params = (
        "profile",
        "size_bytes",
        "runtime_s",
        "direct",
        "ioengine",
        "rw",
        "rwmixread",
        "bs",
        "iodepth",
        "numjobs",
        "fsync",
        "fdatasync",
        "sync",
    )
    # fio's version, and the facts its trust warnings are derived from (fio/analysis.py)
    other_params = (
        "fio_version",
        "fstype",
        "direct_refused",
        "flushes_every_write",
        "machine_memory_bytes",
        "prefill_bytes",
        "gtod_reduce",
    )
    needs_server = False
    sampled = True
    io_by_server = False  # fio does the I/O, not the server
    programs = (
        Program(
            "fio",
            "path",
            "storage probes (`howfast probe`, probe steps in plans)",
            hint="sudo apt-get install -y fio",
            packages={"debian": ("fio",), "rhel": ("fio",), "macos": ("fio",)},
        ),
    )
    prometheus = (
        StepFamily(
            "step_fio_iops",
            "fio's I/O operations per second over the finished step.",
            "op",
            _iops,
        ),
        StepFamily(
            "step_fio_bytes_per_second",
            "fio's bandwidth over the finished step.",
            "op",
            _bytes_per_second,
        ),
    )
    metrics = (
        _m("read_iops", "read IOPS", "IOPS", True, 0),
        _m("write_iops", "write IOPS", "IOPS", True, 0),
        _m("read_mbps", "read MB/s", "MB/s", True, 1),
        _m("write_mbps", "write MB/s", "MB/s", True, 1),
        _m("read_lat_avg_ms", "read latency avg", "ms", False, 3),
        _m("read_lat_p99_ms", "read latency p99", "ms", False, 3),
        _m("write_lat_avg_ms", "write latency avg", "ms", False, 3),
        _m("write_lat_p99_ms", "write latency p99", "ms", False, 3),
        _m("sync_lat_avg_ms", "sync latency avg", "ms", False, 3),
        _m("sync_lat_p99_ms", "sync latency p99", "ms", False, 3),
        _m("commit_ceiling_tps", "commit ceiling", "commits/s", True, 0),
    )
    key_metrics = (*FIO_FIGURES, "commit_ceiling_tps")
    headline_metrics = (
        "read_iops",
        "write_iops",
        "read_lat_avg_ms",
        "write_lat_avg_ms",
        "sync_lat_avg_ms",
    )

    def expand(self, step: FioStep, ctx: ExpandContext) -> list[StepSpec]:
        """Each profile, each repetition."""
        specs = []
        for profile in step.profiles:
            specs += ctx.repeated(
                "fio", profile=profile, size_bytes=step.size, runtime_s=int(step.runtime)
            )
        return specs

    def label(self, params: Mapping[str, JSONValue]) -> str:
        size = params.get("size_bytes")
        size_text = format_bytes(size) if isinstance(size, int) else "?"
        return f"fio {params.get('profile')}, {size_text} file, {params.get('runtime_s')} s"

    def short_label(self, params: Mapping[str, JSONValue]) -> str:
        return f"fio {params.get('profile')}"

    def compact_label(self, params: Mapping[str, JSONValue]) -> str:
        return f"fio {params.get('profile')}"

    def prometheus_labels(self, params: Mapping[str, JSONValue]) -> tuple[str, str]:
        return (str(params.get("profile") or ""), "")

    def progress_summary(self, metrics: Mapping[str, JSONValue]) -> list[str]:
        return [
            f"{key.split('_')[0]} {float(metrics[key]):,.0f} IOPS"
            for key in ("write_iops", "read_iops")
            if key in metrics
        ]

    def judged_metrics(
        self, params: Mapping[str, JSONValue], records: Sequence[StepRecord]
    ) -> tuple[str, ...]:
        """The directions the profile did I/O in."""
        return tuple(
            name
            for name in ("read_iops", "write_iops")
            if any((_number(r.metrics.get(name)) or 0) > 0 for r in records)
        )

    def expected_seconds(self, params: Mapping[str, JSONValue]) -> float | None:
        runtime = params.get("runtime_s")
        return float(runtime) + 1.0 if isinstance(runtime, int | float) else None


PLUGIN = FioPlugin()
