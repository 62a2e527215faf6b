"""Everything a report of one or more runs shows, as data: the targets with their environment,
their steps, the tests with their statistics, the commit-rate ceilings, what limited each
test, and the comparison when there are several runs. The HTML and Markdown reports format
this and nothing else; what each workload shows of it is its report part's (report/hooks.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from howfast.analysis.compare import Comparison, compare_runs
from howfast.analysis.groups import StepGroup, group_steps, is_warmup, target_positions
from howfast.analysis.probe import CommitCeiling, commit_ceiling
from howfast.analysis.summary import storage_summary
from howfast.analysis.why import WhyLine, why_lines
from howfast.model import JSONValue, RunRecord, StepRecord, TargetRecord

# Beyond this many runs a comparison table is too wide to read; `howfast compare` remains.
MAX_COMPARED_RUNS = 6


@dataclass(frozen=True)
class TargetView:
    """A target of a run as the report names it."""

    run_id: int
    position: int
    name: str
    title: str  # '/mnt/a', or 'run 12 /mnt/a' when the report covers several runs
    kind: str
    pg_version: str | None
    storage: str | None
    settings: dict[str, str]
    device: dict[str, JSONValue]
    environment: dict[str, JSONValue]

    @property
    def key(self) -> str:
        return f"{self.run_id}/{self.position}"


@dataclass(frozen=True)
class Placed:
    """A test group with the target it ran on."""

    target: TargetView
    group: StepGroup


@dataclass
class Overview:
    runs: list[RunRecord]
    targets: list[TargetView] = field(default_factory=list)
    tests: list[Placed] = field(default_factory=list)
    steps: list[tuple[TargetView, StepRecord]] = field(default_factory=list)  # all, in order
    warmups: list[tuple[TargetView, StepRecord]] = field(default_factory=list)
    ceilings: list[tuple[TargetView, CommitCeiling]] = field(default_factory=list)
    comparison: Comparison | None = None
    why: list[WhyLine] = field(default_factory=list)  # what limited each test (pgbench's)

    def of(self, workload: str) -> list[Placed]:
        """The tests of `workload`, in the order they ran."""
        return [p for p in self.tests if p.group.workload == workload]

    def steps_of(self, workload: str) -> list[tuple[TargetView, StepRecord]]:
        """Every step of `workload` (warm-ups too), by target, in the order they ran."""
        return [(t, s) for t, s in self.steps if s.workload == workload]


def _target_view(
    run: RunRecord, position: int, name: str, record: TargetRecord | None, several: bool
) -> TargetView:
    title = f"run {run.id} {name}" if several else name
    if several and run.label:
        title = f"run {run.id} ({run.label}) {name}"
    return TargetView(
        run_id=run.id,
        position=position,
        name=name,
        title=title,
        kind=record.kind if record else "?",
        pg_version=record.pg_version if record else None,
        storage=storage_summary(record.device) if record else None,
        settings=dict(record.settings) if record else {},
        device=dict(record.device) if record else {},
        environment=run.environment,
    )


def overview(runs: Sequence[RunRecord]) -> Overview:
    """The report's data for these runs, in the order given."""
    result = Overview(runs=list(runs))
    several = len(runs) > 1
    for run in runs:
        records = {t.name: t for t in run.targets}
        views = {
            name: _target_view(run, position, name, records.get(name), several)
            for name, position in target_positions(run).items()
        }
        result.targets += views.values()
        result.tests += [Placed(views[g.target], g) for g in group_steps(run)]
        result.warmups += [(views[s.target], s) for s in run.steps if is_warmup(s)]
        result.why += why_lines(run, {name: view.title for name, view in views.items()})
        for name, view in views.items():
            own = [s for s in run.steps if s.target == name]
            result.steps += [(view, s) for s in own]
            ceiling = commit_ceiling(own, view.settings)
            if ceiling is not None:
                result.ceilings.append((view, ceiling))
    if 2 <= len(runs) <= MAX_COMPARED_RUNS:
        result.comparison = compare_runs(runs)
    return result
