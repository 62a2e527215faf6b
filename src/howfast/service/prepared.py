"""A run prepared by the run service (service/run.py, service/probe.py): everything decided,
nothing created; what --dry-run prints of it; and the run once it ended."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TextIO

from howfast.machine.pgbin import PgInstall
from howfast.model import JSONValue, RunRecord, StepSpec
from howfast.observer import UNKNOWN_STEP_S, RunObserver
from howfast.plans.fleet import FleetScenario
from howfast.plans.until import Block, UntilRule
from howfast.plugin import registry
from howfast.service.dryrun import plan_document, write_text
from howfast.service.requests import LiveMetrics, SamplingOptions
from howfast.targets.base import Target
from howfast.targets.fleet_base import FleetPlace

if TYPE_CHECKING:  # the runner and samplers load for a run, not for a dry run
    from howfast.samplers.session import SamplerFactory

Shape = Literal["sequential", "interleaved", "fleet"]


@dataclass(frozen=True)
class PreparedFleet:
    place: FleetPlace
    scenarios: tuple[FleetScenario, ...]


@dataclass(frozen=True)
class PreparedRun:
    """A run with everything decided and nothing created yet."""

    command: str  # "howfast run", "howfast probe": the dry run's header says which
    plan_name: str
    install: PgInstall
    steps: tuple[StepSpec, ...]  # each target's; with --until, its first `minimum` rounds
    targets: tuple[Target, ...]  # () for a fleet: its place makes the instances
    fleet: PreparedFleet | None = None
    until: tuple[UntilRule, tuple[Block, ...]] | None = None
    label: str | None = None
    slo: str | None = None  # --slo rto=...,rpo=...: the run's failure objectives, stored
    sampling: SamplingOptions = dataclasses.field(default_factory=SamplingOptions)
    extra_samplers: tuple[SamplerFactory, ...] = ()  # --prometheus's
    live_metrics: LiveMetrics | None = None  # None: no live exporter
    # Checks that hold something (a directory's lock) and so run only when it runs, before
    # the store is opened: the probe's room and programs on its directory.
    before_store: Callable[[], None] | None = None
    probe_directory: Path | None = None  # a probe of a directory (its --dry-run --json shape)

    @property
    def shape(self) -> Shape:
        if self.fleet is not None:
            return "fleet"
        return "interleaved" if self.until is not None else "sequential"

    @property
    def total_steps(self) -> int:
        """Steps in the whole run as planned (an --until run: each test at its minimum)."""
        if self.fleet is not None:
            return sum(s.instances for s in self.fleet.scenarios) * len(self.steps)
        if self.until is not None:
            from howfast.runner.interleaved import planned_steps

            rule, blocks = self.until
            return planned_steps(blocks, len(self.targets), rule)
        return len(self.steps) * len(self.targets)

    @property
    def expected_s(self) -> float:
        """The run's ETA, the one rule for every kind of run: each step's declared duration
        (else UNKNOWN_STEP_S), for each target in turn; an --until run ends by its budget at
        the latest; a fleet's instances run side by side, so its scenarios count, not its
        instances."""
        per_target = sum(
            registry.expected_seconds(s.workload, s.params) or UNKNOWN_STEP_S for s in self.steps
        )
        if self.fleet is not None:
            return per_target * len(self.fleet.scenarios)
        expected = per_target * len(self.targets)
        if self.until is not None and self.until[0].budget_s:
            expected = min(expected, self.until[0].budget_s)
        return expected

    def dry_run_document(self) -> dict[str, JSONValue]:
        """What --dry-run --json prints (service/dryrun.py): every invocation of every
        target's steps; with --until, the rule. A probe of a directory keeps its own shape:
        one entry per step, with fio's job file, and the directory."""
        document = self._plan_document()
        if self.probe_directory is not None:
            return probe_document(document, self.probe_directory)
        return document

    def write_dry_run(self, out: TextIO) -> None:
        """--dry-run for a person: comments, then each command as one would type it."""
        if self.until is not None:
            rule = self.until[0]
            out.write(
                f"# --until {rule.text}: {rule.describe()}; listed below: the first "
                f"{rule.minimum} rounds, one target after the other\n"
            )
        write_text(self._plan_document(), self.command, out)

    def _plan_document(self) -> dict[str, JSONValue]:
        targets = list(self.targets)
        if self.fleet is not None:
            place, scenarios = self.fleet.place, self.fleet.scenarios
            targets = [m for s in scenarios for m in place.members(s, planned=True)]
        document = plan_document(targets, self.steps, self.install)
        if self.until is not None:
            rule = self.until[0]
            document["until"] = {**rule.params(), "text": rule.text, "what": rule.describe()}
        return document


@dataclass(frozen=True)
class FinishedRun:
    """A run that ended (completed, failed or aborted), as stored and derived."""

    run_id: int
    status: str  # completed, failed, aborted
    failed_steps: int
    run: RunRecord


class ProgressDisplay(RunObserver, Protocol):
    """The observer a command draws progress with; closed once the run ends."""

    def close(self) -> None: ...


def probe_document(document: dict[str, JSONValue], directory: Path) -> dict[str, JSONValue]:
    """`probe DIR --dry-run --json`: each step's invocation with what it runs (fio's profile
    and job file), and the directory."""
    entries: list[JSONValue] = []
    (planned,) = document["targets"]
    for step in planned["steps"]:
        (invocation,) = step["invocations"]
        entry: dict[str, JSONValue] = {"workload": step["workload"], **invocation}
        if step["workload"] == "fio":
            profile = str(step["params"]["profile"])
            entry["profile"] = profile
            entry["jobfile"] = invocation["inputs"][f"{profile}.fio"]
        entries.append(entry)
    return {**document, "directory": str(directory), "steps": entries}
