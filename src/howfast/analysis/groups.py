"""Repetitions of one step gathered together, with their statistics.

Steps are the same test when they ran on the same target with the same workload and the same
test params: the ones its workload declares (`test_params`, plugin/workload.py: what was asked
of the tool, and the data it ran on), whatever else was resolved or recorded at run time.
Warm-up steps (`params.warmup`) are never part of a group.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from howfast.analysis.metrics import KEY_METRICS
from howfast.analysis.stats import Stats, describe, stability_warnings
from howfast.analysis.steady import SteadyState, steady_state
from howfast.model import JSONValue, RunRecord, StepRecord
from howfast.plugin.registry import find, same_test_params


def is_warmup(step: StepRecord) -> bool:
    return step.all_params.get("warmup") is True


def matching_params(workload: str, params: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """The params that make two steps of `workload` the same test, in the order the step has
    them (its plugin's `test_key`)."""
    return same_test_params(workload, params)


def params_key(workload: str, params: Mapping[str, JSONValue]) -> str:
    return json.dumps(matching_params(workload, params), sort_keys=True, default=str)


def step_label(workload: str, params: Mapping[str, JSONValue]) -> str:
    """'pgbench select-only, 4 clients', 'fio rand-read-4k-qd64', 'pgbench-init scale 10':
    the workload's short label (plugin/workload.py), then the step's own settings."""
    plugin = find(workload)
    text = plugin.short_label(params) if plugin is not None else workload
    settings = params.get("settings")
    if isinstance(settings, dict) and settings:
        text += ", " + ", ".join(f"{k}={v}" for k, v in settings.items())
    return text


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def step_values(step: StepRecord, steady: SteadyState | None) -> dict[str, float]:
    """The step's key metrics as numbers, with the steady-state ones when known."""
    values = {
        name: number
        for name in KEY_METRICS.get(step.workload, ())
        if (number := _number(step.metrics.get(name))) is not None
    }
    if steady is not None:
        values["steady_tps"] = steady.tps
        if steady.latency_avg_ms is not None:
            values["steady_latency_avg_ms"] = steady.latency_avg_ms
    return values


@dataclass(frozen=True)
class StepGroup:
    """The repetitions of one test on one target of one run, with their statistics (from
    the completed steps; `summarised` builds them)."""

    run_id: int
    target: str
    target_index: int  # position of the target in its run, from 0
    workload: str
    params: Mapping[str, JSONValue]  # its test params
    steps: tuple[StepRecord, ...] = ()
    stats: Mapping[str, Stats] = field(default_factory=dict)
    steady: tuple[SteadyState, ...] = ()
    warnings: Mapping[str, list[str]] = field(default_factory=dict)  # metric -> stability

    @classmethod
    def summarised(
        cls,
        run_id: int,
        target: str,
        target_index: int,
        workload: str,
        params: Mapping[str, JSONValue],
        steps: Sequence[StepRecord],
    ) -> StepGroup:
        plugin = find(workload)
        steady_series = plugin is not None and plugin.steady_series
        per_step: list[dict[str, float]] = []
        found: list[SteadyState] = []
        for step in steps:
            if step.status != "completed":
                continue
            steady = steady_state(step.series) if steady_series else None
            if steady is not None:
                found.append(steady)
            per_step.append(step_values(step, steady))
        names = dict.fromkeys(name for values in per_step for name in values)
        stats = {
            name: describe(values[name] for values in per_step if name in values) for name in names
        }
        return cls(
            run_id,
            target,
            target_index,
            workload,
            params,
            tuple(steps),
            stats,
            tuple(found),
            {name: got for name, s in stats.items() if (got := stability_warnings(s))},
        )

    @property
    def key(self) -> tuple[int, str, str]:
        """What matches this test in another run: target position, workload, parameters."""
        return (self.target_index, self.workload, params_key(self.workload, self.params))

    @property
    def label(self) -> str:
        return step_label(self.workload, self.params)

    @property
    def completed(self) -> list[StepRecord]:
        return [s for s in self.steps if s.status == "completed"]

    @property
    def n(self) -> int:
        return len(self.completed)

    @property
    def failed(self) -> int:
        return len(self.steps) - self.n

    @property
    def step_warnings(self) -> list[str]:
        """What the steps themselves warned about, each text once."""
        return list(dict.fromkeys(w for s in self.steps for w in s.warnings))

    def value(self, metric: str) -> Stats | None:
        return self.stats.get(metric)


def target_positions(run: RunRecord) -> dict[str, int]:
    """Target name -> position in the run; targets only named by steps come after."""
    positions = {t.name: i for i, t in enumerate(run.targets)}
    for step in run.steps:
        positions.setdefault(step.target, len(positions))
    return positions


def count_tests(run: RunRecord, workload: str) -> int:
    """How many distinct tests of this workload the run has (repetitions count once)."""
    return len(
        {
            (s.target, params_key(workload, s.all_params))
            for s in run.steps
            if s.workload == workload and not is_warmup(s)
        }
    )


def group_steps(run: RunRecord) -> list[StepGroup]:
    """The run's tests in the order they first ran, each with its statistics."""
    positions = target_positions(run)
    found: dict[tuple[int, str, str], tuple[str, dict[str, JSONValue], list[StepRecord]]] = {}
    for step in run.steps:
        if is_warmup(step):
            continue
        index = positions[step.target]
        params = matching_params(step.workload, step.all_params)
        key = (index, step.workload, json.dumps(params, sort_keys=True, default=str))
        found.setdefault(key, (step.target, params, []))[2].append(step)
    return [
        StepGroup.summarised(run.id, target, index, workload, params, steps)
        for (index, workload, _), (target, params, steps) in found.items()
    ]
