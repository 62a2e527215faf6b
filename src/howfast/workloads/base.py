"""The Workload interface: one tool invocation with its parameters, run against a target."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from howfast.cancel import NEVER, CancelToken
from howfast.errors import HowfastError
from howfast.event_marks import EventTimeline
from howfast.hosts.base import Host, Invocation, ToolResult
from howfast.machine.pgbin import PgInstall
from howfast.model import JSONValue, Sample, StepRecord
from howfast.plugin import registry
from howfast.targets.base import Connection, Target


@dataclass
class StepContext:
    """What a workload may use while it runs."""

    target: Target
    connection: Connection | None  # None on targets without a server (storage probes)
    install: PgInstall
    work_dir: Path  # private, not on the storage under test: logs and temp files go here
    host: Host  # runs the tools (a client-side workload's: the client's, issue 28)
    cancel: CancelToken = NEVER  # set on Ctrl-C/SIGTERM/SIGHUP: running tools stop
    on_progress: Callable[[float, dict[str, float]], None] = lambda t, values: None
    # Called with the PID of the load generator (pgbench) once started: the samplers watch
    # its CPU, to tell when it rather than the storage set the result.
    on_tool_started: Callable[[int], None] = lambda pid: None
    # Steps already stored for this target in this run, oldest first (a rate curve takes its
    # rates from the full-speed step before it).
    previous: list[StepRecord] = field(default_factory=list)
    # The run's first target's stored steps (rate fractions of its maximum on every target).
    first_target: list[StepRecord] = field(default_factory=list)
    # A step with events (`params["events"]`): their schedule, which the load starts when it
    # starts and reads when it ends (docs/events.md); None for a step without.
    events: EventTimeline | None = None
    # The server's machine, when the tools run elsewhere (a client pod): its memory, its
    # volumes' free space. None: `host` is the server's too.
    server_host: Host | None = None
    # howfast's own SQL connection from this process, when the tools' `connection` is not
    # reachable from here (a client pod dials the primary's pod-network name). None: the same.
    sql: Connection | None = None

    @property
    def cores(self) -> int:
        return self.host.cores()

    def sql_connection(self) -> Connection:
        """The connection for SQL howfast runs itself (sizes, checkpoints, counting rows)."""
        return self.sql or self.server()

    def server_machine(self) -> Host:
        """The host that answers facts about the server's machine (memory, free space)."""
        return self.server_host or self.host

    def server(self) -> Connection:
        """The connection, for workloads that need a server."""
        if self.connection is None:
            raise HowfastError(f"target {self.target.name} has no PostgreSQL server")
        return self.connection

    def run(
        self,
        invocation: Invocation,
        subdir: str | None = None,
        on_line: Callable[[str], None] | None = None,
        *,
        track: bool = False,
    ) -> ToolResult:
        """Run an invocation on the target's host, in the step's work directory (or a
        subdirectory of it); `track` hands the tool's PID to the samplers."""
        where = self.work_dir / subdir if subdir else self.work_dir
        where.mkdir(parents=True, exist_ok=True)
        return self.host.run(
            invocation,
            where,
            cancel=self.cancel,
            on_line=on_line,
            on_start=self.on_tool_started if track else None,
        )


@dataclass
class PlanContext:
    """What --dry-run knows about a step before anything exists: the invocations it prints
    are built by the same functions that build the ones that run."""

    target: Target
    connection: Connection | None  # a PlannedConnection: placeholders for what start decides
    install: PgInstall
    host: Host
    scratch_dir: Path | None

    @property
    def cores(self) -> int:
        return self.host.cores()


@dataclass(frozen=True)
class PlannedInvocation:
    """One invocation of a dry run, with what is still to be decided at run time."""

    invocation: Invocation | None  # None: the step runs no tool (SQL only)
    note: str = ""


@dataclass(frozen=True)
class LoadedData:
    """What the latest pgbench-init step loaded on a target; later steps record it."""

    scale: int
    db_size_bytes: int | None
    dataset: str | None = None  # the regime or size asked for (--dataset), None: a plain scale

    @classmethod
    def last_on(cls, previous: Sequence[StepRecord]) -> LoadedData | None:
        """From a target's finished steps; None when no load ran or the latest failed."""
        for step in reversed(previous):
            if not registry.plugin(step.workload).loads_data:
                continue
            params = step.all_params  # the scale a dataset was sized to is resolved
            scale, size = params.get("scale"), step.metrics.get("db_size_bytes")
            if step.status != "completed" or not isinstance(scale, int):
                return None
            dataset = params.get("dataset")
            return cls(
                scale,
                size if isinstance(size, int) else None,
                str(dataset) if dataset is not None else None,
            )
        return None

    def params(self) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {"scale": self.scale}
        if self.dataset is not None:
            out["dataset"] = self.dataset
        return out


@dataclass(frozen=True)
class StepOutcome:
    """What one step's tool gave, before it is stored: frozen. An executor that builds its
    outcome piece by piece fills an OutcomeDraft and freezes it; the runner adds what it knows
    with the `with_*` methods and `merged`, each a new outcome."""

    status: str = "completed"
    error: str | None = None
    metrics: Mapping[str, JSONValue] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    series: Mapping[str, Sequence[Sample]] = field(default_factory=dict)
    histograms: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    # Params the workload resolved at run time (jobs = min(clients, cores), ...)
    resolved_params: Mapping[str, JSONValue] = field(default_factory=dict)
    # What the samplers saw, by section: "io", "cpu", "postgres" (docs/samplers.md)
    sections: Mapping[str, Mapping[str, JSONValue]] = field(default_factory=dict)

    def merged(self, prepared: StepOutcome) -> StepOutcome:
        """With what the step's prepare() gave: its warnings first, its resolved params and
        metrics (the round-trip probe's) under this outcome's."""
        return replace(
            self,
            warnings=(*prepared.warnings, *self.warnings),
            resolved_params={**prepared.resolved_params, **self.resolved_params},
            metrics={**prepared.metrics, **self.metrics},
        )

    def with_warning(self, warning: str) -> StepOutcome:
        return replace(self, warnings=(*self.warnings, warning))

    def with_resolved(self, params: Mapping[str, JSONValue]) -> StepOutcome:
        """With these resolved params, over the ones it has."""
        return replace(self, resolved_params={**self.resolved_params, **params})

    def with_error(self, error: str | None) -> StepOutcome:
        return replace(self, error=error)

    def with_sampled(
        self,
        series: Mapping[str, Sequence[Sample]],
        metrics: Mapping[str, JSONValue],
        warnings: Sequence[str],
        sections: Mapping[str, Mapping[str, JSONValue]],
    ) -> StepOutcome:
        """Joined with what the samplers saw; the tool's own series and figures win."""
        return replace(
            self,
            series={**self.series, **{k: v for k, v in series.items() if k not in self.series}},
            metrics={
                **self.metrics,
                **{k: v for k, v in metrics.items() if v is not None and k not in self.metrics},
            },
            warnings=(*self.warnings, *warnings),
            sections={**self.sections, **sections},
        )


@dataclass
class OutcomeDraft:
    """A step's outcome while an executor fills it in; `freeze()` when it is done."""

    status: str = "completed"
    error: str | None = None
    metrics: dict[str, JSONValue] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    series: dict[str, list[Sample]] = field(default_factory=dict)
    histograms: dict[str, dict[int, int]] = field(default_factory=dict)
    resolved_params: dict[str, JSONValue] = field(default_factory=dict)
    sections: dict[str, dict[str, JSONValue]] = field(default_factory=dict)

    def freeze(self) -> StepOutcome:
        return StepOutcome(
            status=self.status,
            error=self.error,
            metrics=dict(self.metrics),
            warnings=tuple(self.warnings),
            series={name: tuple(points) for name, points in self.series.items()},
            histograms={name: dict(h) for name, h in self.histograms.items()},
            resolved_params=dict(self.resolved_params),
            sections={name: dict(c) for name, c in self.sections.items()},
        )


class Workload(ABC):
    name: str
    needs_server: bool = True  # False for pure storage probes (fio)

    @abstractmethod
    def label(self, params: dict[str, JSONValue]) -> str:
        """A short human description, e.g. 'pgbench select-only, 4 clients, 10 s'."""

    def prepare(self, ctx: StepContext, params: dict[str, JSONValue]) -> StepOutcome:
        """Called before the samplers start, so that what it does is not measured (seqread
        restarts the server for a cold cache). Its warnings and resolved params join the
        step's outcome; a HowfastError fails the step."""
        return StepOutcome()

    def planned(self, ctx: PlanContext, params: dict[str, JSONValue]) -> list[PlannedInvocation]:
        """The invocations execute() would run, for --dry-run; built without running
        anything or touching the storage."""
        return [PlannedInvocation(None, "runs no external tool")]

    @abstractmethod
    def execute(self, ctx: StepContext, params: dict[str, JSONValue]) -> StepOutcome:
        """Run once; tool failures become a failed outcome, not an exception. Must stop any
        process it started before returning or raising (including on Aborted)."""
