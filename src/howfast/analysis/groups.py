"""Repetitions of one step gathered together, with their statistics.

Steps are the same test when they ran on the same target with the same workload and the same
test params (TEST_PARAMS: what was asked of the tool, and the data it ran on), whatever else
was resolved or recorded at run time. Warm-up steps (`params.warmup`) are never part of a
group.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from howfast.analysis.metrics import KEY_METRICS
from howfast.analysis.stats import Stats, describe, stability_warnings
from howfast.analysis.steady import SteadyState, steady_state
from howfast.model import JSONValue, RunRecord, StepRecord

# The params that say what a test is, looked up in a step's params as run (asked, with what
# was resolved: the scale and dataset loaded, the jobs pgbench ran with). Not in the list:
# which repetition it was, which run of a curve came last, tool versions, and the facts
# recorded at run time (settings_applied, fstype, cache_reset...), which describe a result.
TEST_PARAMS = (
    # pgbench and pgbench-init (script: imported output)
    "mode",
    "scripts",
    "script",
    "clients",
    "jobs",
    "duration_s",
    "transactions",
    "scale",
    "dataset",
    "rate",
    "rate_fraction",
    "rate_basis",
    "curve_role",
    "slo",
    "latency_limit_ms",
    "protocol",
    "extra_args",
    "events",  # a step with events measures an outage: never the same test as a quiet one
    "segment",
    "settings",
    "warmup",
    "generate",
    "fillfactor",
    "partitions",
    "partition_method",
    # fio (the job options: imported output)
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
    # pg_test_fsync, seqread
    "seconds",
    "cold",
    "parallel",
)


def is_warmup(step: StepRecord) -> bool:
    return step.all_params.get("warmup") is True


def matching_params(params: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """The parameters that make two steps the same test, in the order the step has them. A
    step of a rate curve asks for a fraction of the maximum; the rate that came to is a
    result, not part of the test."""
    keys = set(TEST_PARAMS) - ({"rate"} if "rate_fraction" in params else set())
    return {k: v for k, v in params.items() if k in keys}


def params_key(params: Mapping[str, JSONValue]) -> str:
    return json.dumps(matching_params(params), sort_keys=True, default=str)


def step_label(workload: str, params: Mapping[str, JSONValue]) -> str:
    """'pgbench select-only, 4 clients', 'fio rand-read-4k-qd64', 'pgbench-init scale 10':
    the workload's short label (plugin/workload.py), then the step's own settings."""
    from howfast.plugin.registry import find

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


@dataclass
class StepGroup:
    """The repetitions of one test on one target of one run."""

    run_id: int
    target: str
    target_index: int  # position of the target in its run, from 0
    workload: str
    params: dict[str, JSONValue]  # its TEST_PARAMS
    steps: list[StepRecord] = field(default_factory=list)
    # Filled by `summarise` from the completed steps:
    stats: dict[str, Stats] = field(default_factory=dict)
    steady: list[SteadyState] = field(default_factory=list)
    warnings: dict[str, list[str]] = field(default_factory=dict)  # metric -> stability

    @property
    def key(self) -> tuple[int, str, str]:
        """What matches this test in another run: target position, workload, parameters."""
        return (self.target_index, self.workload, params_key(self.params))

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

    def summarise(self) -> None:
        per_step: list[dict[str, float]] = []
        self.steady = []
        for step in self.completed:
            steady = steady_state(step.series) if step.workload == "pgbench" else None
            if steady is not None:
                self.steady.append(steady)
            per_step.append(step_values(step, steady))
        names = dict.fromkeys(name for values in per_step for name in values)
        self.stats = {
            name: describe(values[name] for values in per_step if name in values) for name in names
        }
        self.warnings = {
            name: found for name, s in self.stats.items() if (found := stability_warnings(s))
        }


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
            (s.target, params_key(s.all_params))
            for s in run.steps
            if s.workload == workload and not is_warmup(s)
        }
    )


def group_steps(run: RunRecord) -> list[StepGroup]:
    """The run's tests in the order they first ran, each with its statistics."""
    positions = target_positions(run)
    groups: dict[tuple[int, str, str], StepGroup] = {}
    for step in run.steps:
        if is_warmup(step):
            continue
        index = positions[step.target]
        params = matching_params(step.all_params)
        key = (index, step.workload, params_key(params))
        group = groups.get(key)
        if group is None:
            group = groups[key] = StepGroup(run.id, step.target, index, step.workload, params)
        group.steps.append(step)
    for group in groups.values():
        group.summarise()
    return list(groups.values())
