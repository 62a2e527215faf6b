"""The one interface a workload implements to be planned, labelled, timed and analysed.

A workload is one package under howfast.workloads whose module `plan` (`workloads/fio/plan.py`,
`workloads/pgbench/init/plan.py`) defines a module-level `PLUGIN`, an instance of a
`WorkloadPlugin` subclass. The registry (plugin/registry.py) finds it; nothing else lists
workloads. The plugin owns:

- `model`: the pydantic model of its `[[steps]]` table in a plan file (`workload = "<name>"`);
- `expand(step, ctx)`: the steps it becomes, with their params (the stable JSON contract of
  docs/plans/format.md);
- `label(params)` (progress lines), `short_label(params)` (tables and comparisons);
- `expected_seconds(params)` (ETAs), `metrics`, `key_metrics`, `headline_metrics`
  (what analysis summarises and reports show);
- `check_overrides(overrides)`: refuses a command-line override it cannot take (pgbench:
  an unknown `--modes` value), before anything runs;
- `needs_server`, `sampled`, `loads_data`, `reads_loaded_data` (a step is skipped when the
  load it reads failed), and `executor_class`, the "module:Class" of the Workload that runs
  it, imported only when a step runs (workloads.get_workload) so that plans and analysis
  never import executors.

Plugin modules import nothing of howfast.plans: the plan model is built from them.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from howfast.model import JSONValue, StepSpec
from howfast.plugin.overrides import Overrides

if TYPE_CHECKING:
    from howfast.metric import Metric


class StepModel(BaseModel):
    """A `[[steps]]` table of a plan file. Subclasses add `workload: Literal["<name>"]` (the
    discriminator) and their keys; unknown keys are errors, and a TOML string is never
    silently an integer."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    workload: str


@dataclass
class ExpandContext:
    """What expansion carries from one step of a plan to the next."""

    overrides: Overrides
    repeat: int  # how many times each measuring step runs (`repeat`, or --repeat)
    # The scale later steps record: --scale, else the latest pgbench-init's (None: unknown,
    # e.g. a dataset whose scale is computed on the target).
    scale: int | None = None

    def repeated(self, workload: str, **params: JSONValue) -> list[StepSpec]:
        """`repeat` steps with these params, numbered from 1."""
        # A fresh copy per spec: a consumer that edits one step's params must not edit another's.
        return [
            StepSpec(workload, copy.deepcopy(params), repetition=r)
            for r in range(1, self.repeat + 1)
        ]


S = TypeVar("S", bound=StepModel)


class WorkloadPlugin(ABC, Generic[S]):
    """A workload as plans, progress, analysis and reports see it."""

    name: str  # the `workload` key of a plan step and of a stored step
    model: type[S]
    order: int = 100  # position in listings ("one of ...") and in error messages
    needs_server: bool = True  # False for pure storage probes (fio, pg_test_fsync)
    sampled: bool = False  # whether the samplers watch its steps
    loads_data: bool = False  # it (re)creates the tables later steps read (pgbench-init)
    # It reads the tables a `loads_data` step made: skipped, with the reason, when the
    # target's latest such step did not complete (half-loaded tables, no primary keys).
    reads_loaded_data: bool = False
    metrics: tuple[Metric, ...] = ()  # catalogue entries of the metrics it reports
    key_metrics: tuple[str, ...] = ()  # summarised over repetitions and compared, in order
    headline_metrics: tuple[str, ...] = ()  # the few people quote, where room is short
    executor_class: str = ""  # "module:Class" of its Workload, imported when a step runs
    # "module:attribute" of its WorkloadAnalysis (analysis/hooks.py): its part of reading a
    # run, imported by the analysis layer; None: its steps read as stored
    analysis: str | None = None

    @abstractmethod
    def expand(self, step: S, ctx: ExpandContext) -> list[StepSpec]:
        """The steps of one `[[steps]]` table, in the order they run."""

    @abstractmethod
    def label(self, params: Mapping[str, JSONValue]) -> str:
        """A short human description, e.g. 'pgbench select-only, 4 clients, 10 s'."""

    def short_label(self, params: Mapping[str, JSONValue]) -> str:
        """What tells a step apart in a table: 'pgbench select-only, 4 clients'."""
        return self.name

    def expected_seconds(self, params: Mapping[str, JSONValue]) -> float | None:
        """How long a step should take, for ETAs; None when unknown."""
        return None

    def check_overrides(self, overrides: Overrides) -> None:
        """UsageError for an override this workload cannot take; called for every workload
        when a plan is expanded, whether the plan has its steps or not."""
