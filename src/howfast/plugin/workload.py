"""The one interface a workload implements: everything particular to it, declared in one place.

A workload is one package whose module `plan` (`workloads/fio/plan.py`,
`workloads/pgbench/init/plan.py`, or any module an installed distribution names in the
`howfast.workloads` entry-point group) defines a module-level `PLUGIN`, an instance of a
`WorkloadPlugin` subclass. The registry (plugin/registry.py) finds it; nothing else lists
workloads. The plugin declares:

- plan: `model` (its `[[steps]]` table), `expand(step, ctx)` (its steps and their params, the
  JSON contract of docs/plans/format.md), `check_overrides(overrides)`;
- params: `test_params`, the ones that make two steps different tests (grouping, comparison,
  `--until`), and `other_params`, the ones it records that do not (`test_key`);
- labels: `label` (progress), `short_label` (tables, comparisons), `compact_label` (I/O
  tables), `fleet_label` (a fleet's test), `prometheus_labels` (`mode`, `clients`),
  `progress_summary` (the end-of-step line), `expected_seconds` (ETAs);
- metrics: `metrics` (catalogue), `key_metrics` (summarised, compared), `headline_metrics`,
  `prometheus` (its families of a finished step), `judged_metrics` (what `--until` judges);
- traits, asked instead of its name: `needs_server`, `sampled`, `drives_sessions`,
  `io_by_server`, `loads_data`, `reads_loaded_data`, `client_side`, `throughput_metric`,
  `steady_series`, `counts_transactions`, `load_metric`, `cold_read_metric`, `full_speed`,
  `design_figures`, `programs` (what the doctor checks, `cleanup` looks for in a step's work
  directory, and `doctor` says how to install);
- parts, "module:attribute" strings imported only by the layer that uses them, so that
  declaring a workload imports none of them: `executor_class` (a workloads.base.Workload,
  workloads.get_workload), `analysis` (an analysis.hooks.WorkloadAnalysis), `report` (a
  report.hooks.WorkloadReport), `importer` (a plugin.importing.TextImporter, `howfast import`).

Plugin modules import nothing of howfast.plans (the plan model is built from them), nor
analysis, report or store (import-linter's `declarations` contract).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from howfast.model import JSONValue, StepRecord, StepSpec
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
    # --trials (or the plan's `trials`): how many trials each pgbench step with events runs
    # (plugin/trials.py); None: such steps repeat as the others do
    trials: int | None = None

    def repeated(
        self, workload: str, *, times: int | None = None, **params: JSONValue
    ) -> list[StepSpec]:
        """`repeat` (or `times`: a step's trials) steps with these params, numbered from 1."""
        # A fresh copy per spec: a consumer that edits one step's params must not edit another's.
        return [
            StepSpec(workload, copy.deepcopy(params), repetition=r)
            for r in range(1, (times or self.repeat) + 1)
        ]


# Params any workload's step may have that make two steps different tests: postgresql.conf
# settings for the step alone, and a warm-up (stored, left out of every figure).
COMMON_TEST_PARAMS = ("settings", "warmup")
# Params any step may have that never make two steps different tests: which repetition it
# was, the `--until` rule it repeated under, whether its settings were applied (the runner),
# a fleet instance's place and own I/O (fleets), the design rebuilt after a failover, and how
# many trials (--trials) it was one of.
COMMON_OTHER_PARAMS = (
    "repetition",
    "until",
    "settings_applied",
    "scenario",
    "class",
    "instance",
    "io_limits",
    "storage_class",
    "own_read_ios",
    "own_write_ios",
    "own_io_seconds",
    "design_restored",
    # how many trials the step was one of (--trials): each trial is a repetition of one test
    "trials",
)


@dataclass(frozen=True)
class Program:
    """A program a workload runs, which `howfast doctor` looks for."""

    name: str  # "pgbench", "fio"
    # "postgres": in the PostgreSQL installation howfast uses; "path": on PATH
    source: Literal["postgres", "path"]
    needed_for: str  # what cannot run without it: "storage probes (...)"
    required: bool = False  # without it, howfast is of no use (pgbench)
    hint: str | None = None  # how to install it; None: the PostgreSQL install hint
    version_args: tuple[str, ...] = ("--version",)
    # The OS packages that install it, by family ("debian", "rhel", "macos"), for the
    # commands `howfast doctor` prints (service/install_hints.py). None: a "postgres" program
    # comes with PostgreSQL's packages; a "path" one has no command.
    packages: Mapping[str, tuple[str, ...]] | None = None


@dataclass(frozen=True)
class StepFamily:
    """A Prometheus family a finished step of this workload sets (docs/prometheus.md): its
    name after `howfast_`, its help, one label of its own (or None) and the (label value,
    value) pairs read from the step's metrics; a None value sets nothing."""

    name: str
    help: str
    label: str | None
    values: Callable[[Mapping[str, JSONValue]], Iterable[tuple[str, float | None]]]


S = TypeVar("S", bound=StepModel)


class WorkloadPlugin(ABC, Generic[S]):
    """A workload as plans, progress, analysis and reports see it."""

    name: str  # the `workload` key of a plan step and of a stored step
    model: type[S]
    order: int = 100  # position in listings ("one of ...") and in error messages

    # -- params: which make two steps different tests ------------------------------------
    # The params that say what a test is, looked up in a step's params as run (asked, with
    # what was resolved: the scale loaded, the jobs pgbench ran with), besides the
    # COMMON_TEST_PARAMS. A param missing from both lists is a test's classification test
    # failure (tests/unit/test_groups.py), never a silent merge of two tests.
    test_params: tuple[str, ...] = ()
    # The params its steps record that do not make a test: tool versions, facts recorded at
    # run time (fstype, cache_reset...), which point of a curve came last.
    other_params: tuple[str, ...] = ()

    # -- metrics -----------------------------------------------------------------------------
    metrics: tuple[Metric, ...] = ()  # catalogue entries of the metrics it reports
    key_metrics: tuple[str, ...] = ()  # summarised over repetitions and compared, in order
    headline_metrics: tuple[str, ...] = ()  # the few people quote, where room is short
    prometheus: tuple[StepFamily, ...] = ()  # families a finished step sets

    # -- traits: what other parts ask instead of the workload's name ------------------------
    needs_server: bool = True  # False for pure storage probes (fio, pg_test_fsync)
    sampled: bool = False  # whether the samplers watch its steps
    # Its client sessions do the work: their wait events say what limited it (samplers/waits.py)
    drives_sessions: bool = False
    # The server does its I/O (False: the tool itself writes, fio and pg_test_fsync, so the
    # server's share of a device's I/O says nothing about who else used it)
    io_by_server: bool = True
    loads_data: bool = False  # it (re)creates the tables later steps read (pgbench-init)
    # It reads the tables a `loads_data` step made: skipped, with the reason, when the
    # target's latest such step did not complete (half-loaded tables, no primary keys); it
    # records the scale (and dataset) loaded.
    reads_loaded_data: bool = False
    # A database client: where a target places clients apart from the server (issue 28), its
    # tools run there (pgbench, pgbench -i); False: beside the storage (fio, pg_test_fsync)
    client_side: bool = False
    # The metric of its throughput ("tps"): fleets, latency sweeps and the regimes table
    # compare it; None: it has none to compare
    throughput_metric: str | None = None
    steady_series: bool = False  # its per-second "tps" series has a steady state
    # Live transaction and failure counters exist from its start (metrics/families.py)
    counts_transactions: bool = False
    load_metric: str | None = None  # the time a load took ("init_total_s"): regimes
    cold_read_metric: str | None = None  # the time a large cold read took: regimes
    # Its steps are a replication design's figures (analysis/replication.py): lags, WAL, the
    # SyncRep share and the commit split derived, its throughput by clients compared between
    # designs (the `replication` plan's table)
    design_figures: bool = False
    programs: tuple[Program, ...] = ()  # what `howfast doctor` checks for it

    # -- parts, "module:attribute", imported only by the layer that uses them --------------
    executor_class: str = ""  # its Workload (workloads/base.py), imported when a step runs
    # its WorkloadAnalysis (analysis/hooks.py): its part of reading a run; None: its steps
    # read as stored
    analysis: str | None = None
    # its WorkloadReport (report/hooks.py): its tables and sections; None: a generic table of
    # its key metrics
    report: str | None = None
    # its TextImporter (plugin/importing.py): `howfast import <command>`; None: no import
    importer: str | None = None

    @abstractmethod
    def expand(self, step: S, ctx: ExpandContext) -> list[StepSpec]:
        """The steps of one `[[steps]]` table, in the order they run."""

    def check_overrides(self, overrides: Overrides) -> None:
        """UsageError for an override this workload cannot take; called for every workload
        when a plan is expanded, whether the plan has its steps or not."""

    def test_key(self, params: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
        """The params that make two of its steps the same test, in the order the step has
        them."""
        keys = {*self.test_params, *COMMON_TEST_PARAMS}
        return {k: v for k, v in params.items() if k in keys}

    # -- labels ------------------------------------------------------------------------------

    @abstractmethod
    def label(self, params: Mapping[str, JSONValue]) -> str:
        """A short human description, e.g. 'pgbench select-only, 4 clients, 10 s'."""

    def short_label(self, params: Mapping[str, JSONValue]) -> str:
        """What tells a step apart in a table: 'pgbench select-only, 4 clients'."""
        return self.name

    def compact_label(self, params: Mapping[str, JSONValue]) -> str:
        """A step in a narrow column (the I/O tables): 'pgbench select-only 4c'."""
        return self.name

    def fleet_label(self, params: Mapping[str, JSONValue]) -> str:
        """The test a fleet's step ran, as the fleet document's `test` names it."""
        return self.name

    def prometheus_labels(self, params: Mapping[str, JSONValue]) -> tuple[str, str]:
        """The `mode` and `clients` labels of its steps' Prometheus series ("" when none)."""
        return ("", "")

    def progress_summary(self, metrics: Mapping[str, JSONValue]) -> list[str]:
        """What the end-of-step progress line says of a completed step: '1,234.5 tps'."""
        return []

    def expected_seconds(self, params: Mapping[str, JSONValue]) -> float | None:
        """How long a step should take, for ETAs; None when unknown."""
        return None

    # -- metrics and traits that depend on the step --------------------------------------

    def judged_metrics(
        self, params: Mapping[str, JSONValue], records: Sequence[StepRecord]
    ) -> tuple[str, ...]:
        """The figures whose interval `--until` judges for one test, from its records."""
        return self.key_metrics[:1]

    def full_speed(self, params: Mapping[str, JSONValue]) -> bool:
        """Whether a step measured the most it could (not a warm-up, no offered rate): what
        fleets, latency sweeps and the regimes table compare."""
        return params.get("warmup") is not True
