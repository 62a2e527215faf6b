"""The `fio` workload as a plan sees it: named job profiles on a file in the target's data
directory, one step per profile and repetition."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from howfast.analysis.metrics import FIO_FIGURES
from howfast.metric import Metric
from howfast.model import JSONValue, StepSpec
from howfast.plugin.fields import Duration, Size, no_duplicates
from howfast.plugin.workload import ExpandContext, StepModel, WorkloadPlugin
from howfast.units import format_bytes, quote, whole_seconds

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


class FioPlugin(WorkloadPlugin[FioStep]):
    name = "fio"
    model = FioStep
    order = 30
    needs_server = False
    sampled = True
    executor_class = "howfast.workloads.fio.workload:FioWorkload"
    analysis = "howfast.workloads.fio.analysis:ANALYSIS"
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

    def expected_seconds(self, params: Mapping[str, JSONValue]) -> float | None:
        runtime = params.get("runtime_s")
        return float(runtime) + 1.0 if isinstance(runtime, int | float) else None


PLUGIN = FioPlugin()
