"""The `seqread` workload as a plan sees it: the time to read the largest pgbench table in
full, from a cold cache (or as the caches hold it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from howfast.model import JSONValue, StepSpec
from howfast.plugin.workload import ExpandContext, StepModel, WorkloadPlugin


class SeqreadStep(StepModel):
    """seqread: the time to read the largest pgbench table in full, from a cold cache."""

    workload: Literal["seqread"]
    cold: bool = True  # restart the server and drop the OS page cache first
    parallel: bool = False  # let PostgreSQL read with parallel workers


class SeqreadPlugin(WorkloadPlugin[SeqreadStep]):
    name = "seqread"
    model = SeqreadStep
    order = 50
    executor_class = "howfast.workloads.seqread.workload:SeqreadWorkload"
    # How it read, and the data it read (scale, dataset: the latest load's)
    test_params = ("cold", "parallel", "scale", "dataset")
    other_params = ("table", "scan", "parallel_workers", "cache_reset")
    sampled = True
    reads_loaded_data = True
    cold_read_metric = "seqread_s"

    def expand(self, step: SeqreadStep, ctx: ExpandContext) -> list[StepSpec]:
        known: dict[str, JSONValue] = {"scale": ctx.scale} if ctx.scale is not None else {}
        return ctx.repeated("seqread", cold=step.cold, parallel=step.parallel, **known)

    def label(self, params: Mapping[str, JSONValue]) -> str:
        how = "cold" if params.get("cold", True) else "warm"
        return f"seqread: {how} read of the largest pgbench table"


PLUGIN = SeqreadPlugin()
