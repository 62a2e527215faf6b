"""The `pgbench-init` workload as a plan sees it: `pgbench --initialize` with a scale, or a
working-set regime (`dataset`) whose scale is computed on the target (sizing.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field, model_validator

from howfast.metric import Metric
from howfast.model import JSONValue, StepSpec
from howfast.plugin.fields import PositiveInt, check_extra_arg, conflict
from howfast.plugin.workload import ExpandContext, Program, StepModel, WorkloadPlugin
from howfast.sizing import dataset_value

# pgbench-init's phases in the order pgbench runs them.
INIT_PHASES = ("drop_s", "create_s", "generate_s", "vacuum_s", "primary_keys_s")

# Options that a plan key controls; in extra_args they would contradict the recorded params.
_OWNED = {
    "-i": "workload",
    "--initialize": "workload",
    "-s": "scale",
    "--scale": "scale",
    "-F": "fillfactor",
    "--fillfactor": "fillfactor",
    "--partitions": "partitions",
    "--partition-method": "partition_method",
}


def _init_arg(arg: str) -> str:
    return check_extra_arg(arg, _OWNED)


InitArg = Annotated[str, AfterValidator(_init_arg)]


class PgbenchInitStep(StepModel):
    """`pgbench --initialize`: create and load the pgbench tables."""

    workload: Literal["pgbench-init"]
    scale: PositiveInt | None = None
    # A working-set regime or a size: the scale is then computed on the target (sizing.py)
    dataset: Annotated[str, AfterValidator(dataset_value)] | None = None
    generate: Literal["client", "server"] = "client"
    fillfactor: int = Field(default=100, ge=10, le=100)
    partitions: int = Field(default=0, ge=0)
    partition_method: Literal["range", "hash"] = "range"
    extra_args: list[InitArg] = Field(default_factory=list)

    @model_validator(mode="after")
    def _partition_method_needs_partitions(self) -> Self:
        if "partition_method" in self.model_fields_set and self.partitions == 0:
            raise conflict("partition_method", "partition_method needs partitions of 1 or more")
        return self

    @model_validator(mode="after")
    def _scale_or_dataset(self) -> Self:
        if self.scale is not None and self.dataset is not None:
            raise conflict("dataset", "give scale or dataset, not both")
        if self.scale is None and self.dataset is None:
            raise conflict(None, "missing scale (or dataset): how much data to load")
        return self


def _m(name: str, label: str) -> Metric:
    return Metric(name, label, "s", False, 2)


class PgbenchInitPlugin(WorkloadPlugin[PgbenchInitStep]):
    name = "pgbench-init"
    model = PgbenchInitStep
    order = 10
    executor_class = "howfast.workloads.pgbench.workload:PgbenchInitWorkload"
    report = "howfast.workloads.pgbench.init.report:REPORT"
    # What was loaded and how (script: imported output)
    test_params = (
        "scale",
        "dataset",
        "generate",
        "fillfactor",
        "partitions",
        "partition_method",
        "extra_args",
        "script",
    )
    other_params = ("regime", "memory_bytes", "memory_basis")  # a dataset's sizing
    loads_data = True
    client_side = True  # pgbench -i is a client (generate = "server" makes the rows there)
    load_metric = "init_total_s"
    programs = (Program("pgbench", "postgres", "every PostgreSQL benchmark", required=True),)
    metrics = (
        _m("init_total_s", "load time"),
        _m("drop_s", "drop"),
        _m("create_s", "create"),
        _m("generate_s", "generate"),
        _m("vacuum_s", "vacuum"),
        _m("primary_keys_s", "primary keys"),
        Metric("db_size_bytes", "database size", "bytes", None, 0),
    )
    key_metrics = ("init_total_s", *INIT_PHASES, "db_size_bytes")
    headline_metrics = ("init_total_s",)

    def expand(self, step: PgbenchInitStep, ctx: ExpandContext) -> list[StepSpec]:
        """Once, whatever `repeat` says. It sets the scale the steps after it record."""
        overrides = ctx.overrides
        # --scale and --dataset each replace both keys. The scale of a dataset is computed
        # on the target; the runner then records it in the steps that follow.
        dataset = None if overrides.scale else overrides.dataset or step.dataset
        ctx.scale = None if dataset else overrides.scale or step.scale
        params: dict[str, JSONValue] = {"dataset": dataset} if dataset else {"scale": ctx.scale}
        params |= {
            "generate": step.generate,
            "fillfactor": step.fillfactor,
            "partitions": step.partitions,
        }
        if step.partitions > 0:
            params["partition_method"] = step.partition_method
        if step.extra_args:
            params["extra_args"] = list(step.extra_args)
        return [StepSpec("pgbench-init", params)]

    def label(self, params: Mapping[str, JSONValue]) -> str:
        if params.get("dataset") is not None and params.get("scale") is None:
            return f"pgbench -i, dataset {params['dataset']}"
        return f"pgbench -i scale {params.get('scale')}"

    def short_label(self, params: Mapping[str, JSONValue]) -> str:
        return f"pgbench-init scale {params.get('scale')}"

    def expected_seconds(self, params: Mapping[str, JSONValue]) -> float | None:
        return 2.0 + 0.3 * float(params.get("scale") or 1)

    def progress_summary(self, metrics: Mapping[str, JSONValue]) -> list[str]:
        if "init_total_s" not in metrics:
            return []
        return [f"loaded in {float(metrics['init_total_s']):.2f} s"]


PLUGIN = PgbenchInitPlugin()
