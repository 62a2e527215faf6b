"""A fleet run, per scenario, step and class: instances, total TPS, TPS per instance, latency
across instances, Jain's fairness index, each class's share, and whether its I/O limits held.
Pure functions of a run's steps (params scenario/class/instance/io_limits, the instance's own
I/O counts own_*_ios over own_io_seconds)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from howfast.model import JSONValue, RunRecord, StepRecord
from howfast.plugin.registry import find

HELD_SLACK = 1.10  # achieved IOPS up to 10% over a cap still counts as held (timing edges)
REACHED = 0.80  # below 80% of the cap, the cap was not what limited the instance
IRRELEVANT = 0.10  # below 10% of a cap, the test hardly used that direction
STARVED = 5.0  # a class whose p99 is this many times the best class's is starved


def jain_index(values: Sequence[float]) -> float | None:
    """(sum x)^2 / (n * sum x^2): 1 when all get the same, 1/n when one gets everything."""
    if not values:
        return None
    squares = sum(v * v for v in values)
    if squares == 0:
        return None
    return sum(values) ** 2 / (len(values) * squares)


def _num(value: JSONValue) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass
class ClassFigures:
    scenario: str
    test: str  # the step, e.g. "pgbench select-only, 4 clients"
    klass: str
    instances: int
    completed: int
    tps: list[float] = field(default_factory=list)  # per completed instance
    p50_ms: float | None = None  # median of the instances' p50
    p99_ms: float | None = None  # worst of the instances' p99
    fairness: float | None = None
    share: float | None = None  # of the scenario's total TPS for this step
    limits: dict[str, int] = field(default_factory=dict)
    read_iops: list[float] = field(default_factory=list)  # achieved, per instance
    write_iops: list[float] = field(default_factory=list)
    storage_class: str | None = None  # k8s:// fleets: what sets the class's limits

    @property
    def total_tps(self) -> float:
        return sum(self.tps)

    @property
    def median_tps(self) -> float | None:
        return statistics.median(self.tps) if self.tps else None

    def enforcement(self) -> list[str]:
        """Per capped direction: held, not reached, or did not hold, with the figures. On
        Kubernetes the StorageClass sets the limits, which howfast cannot see being applied."""
        if self.storage_class is not None:
            return [
                f"limits are StorageClass {self.storage_class}'s: not verifiable from outside "
                "the node"
            ]
        out = []
        for direction, achieved in (("read", self.read_iops), ("write", self.write_iops)):
            cap = self.limits.get(f"{direction}_iops")
            if not cap or not achieved:
                continue
            top = max(achieved)
            if top < cap * IRRELEVANT:
                continue  # the class hardly used that direction: nothing to say of its cap
            if top > cap * HELD_SLACK:
                out.append(f"the {direction} limit did not hold: {top:,.0f} IOPS > {cap:,}")
            elif top >= cap * REACHED:
                out.append(f"the {direction} limit held: at most {top:,.0f} of {cap:,} IOPS")
            else:
                out.append(
                    f"the {direction} limit was not reached: at most {top:,.0f} of {cap:,} IOPS"
                )
        return out

    def document(self) -> dict[str, JSONValue]:
        return {
            "scenario": self.scenario,
            "test": self.test,
            "class": self.klass,
            "instances": self.instances,
            "completed": self.completed,
            "tps_total": round(self.total_tps, 3),
            "tps_per_instance": {
                "median": self.median_tps,
                "min": min(self.tps) if self.tps else None,
                "max": max(self.tps) if self.tps else None,
            },
            "latency_p50_ms": self.p50_ms,
            "latency_p99_ms": self.p99_ms,
            "fairness": self.fairness,
            "share": self.share,
            "limits": dict(self.limits),
            "storage_class": self.storage_class,
            "read_iops": [round(v, 1) for v in self.read_iops],
            "write_iops": [round(v, 1) for v in self.write_iops],
            "enforcement": self.enforcement(),
        }


def is_fleet(run: RunRecord) -> bool:
    return any("scenario" in s.params and "class" in s.params for s in run.steps)


def _throughput(step: StepRecord) -> str | None:
    """The metric of the step's throughput (pgbench's `tps`); None: it has none to share."""
    plugin = find(step.workload)
    return plugin.throughput_metric if plugin is not None else None


def fleet_figures(run: RunRecord) -> list[ClassFigures]:
    """Per scenario, measured test and class (in the order they ran), of the steps that have
    a throughput (pgbench's)."""
    groups: dict[tuple[str, str, str], list[StepRecord]] = {}
    for step in run.steps:
        p = step.params
        plugin = find(step.workload)
        if plugin is None or plugin.throughput_metric is None:
            continue
        if "scenario" not in p or p.get("warmup"):
            continue
        key = (str(p["scenario"]), plugin.fleet_label(step.all_params), str(p.get("class")))
        groups.setdefault(key, []).append(step)
    out = []
    for (scenario, test, klass), steps in groups.items():
        figures = ClassFigures(scenario, test, klass, len(steps), 0)
        limits = steps[0].params.get("io_limits")
        if isinstance(limits, dict):
            figures.limits = {str(k): int(v) for k, v in limits.items()}
        storage_class = steps[0].params.get("storage_class")
        figures.storage_class = str(storage_class) if storage_class is not None else None
        p50s: list[float] = []
        p99s: list[float] = []
        for step in steps:
            tps = _num(step.metrics.get(_throughput(step) or ""))
            if step.status != "completed" or tps is None:
                continue
            figures.completed += 1
            figures.tps.append(tps)
            for name, into in (("latency_p50_ms", p50s), ("latency_p99_ms", p99s)):
                value = _num(step.metrics.get(name))
                if value is not None:
                    into.append(value)
            r = step.all_params
            seconds = _num(r.get("own_io_seconds"))
            if seconds:
                figures.read_iops.append((_num(r.get("own_read_ios")) or 0.0) / seconds)
                figures.write_iops.append((_num(r.get("own_write_ios")) or 0.0) / seconds)
        figures.p50_ms = statistics.median(p50s) if p50s else None
        figures.p99_ms = max(p99s) if p99s else None
        figures.fairness = jain_index(figures.tps)
        out.append(figures)
    totals: dict[tuple[str, str], float] = {}
    for f in out:
        totals[(f.scenario, f.test)] = totals.get((f.scenario, f.test), 0.0) + f.total_tps
    for f in out:
        total = totals[(f.scenario, f.test)]
        f.share = f.total_tps / total if total else None
    return out


def fleet_verdicts(figures: Sequence[ClassFigures]) -> list[str]:
    """One sentence per finding: limits held or not, and starved classes."""
    out = []
    said: set[tuple[str, str]] = set()
    for f in figures:
        for finding in f.enforcement():
            if f.storage_class is not None:  # the same for every test: said once per class
                if (f.klass, finding) in said:
                    continue
                said.add((f.klass, finding))
                out.append(f"{f.klass}: {finding}")
                continue
            out.append(f"{f.scenario}, {f.test}, {f.klass}: {finding}")
    by_test: dict[tuple[str, str], list[ClassFigures]] = {}
    for f in figures:
        by_test.setdefault((f.scenario, f.test), []).append(f)
    for (scenario, test), classes in by_test.items():
        with_p99 = [c for c in classes if c.p99_ms]
        if len(with_p99) < 2:
            continue
        best = min(with_p99, key=lambda c: c.p99_ms or 0.0)
        for c in with_p99:
            assert c.p99_ms is not None and best.p99_ms is not None
            ratio = c.p99_ms / best.p99_ms
            if c is not best and ratio >= STARVED:
                out.append(
                    f"{scenario}, {test}: {c.klass} starved (p99 {c.p99_ms:,.1f} ms, "
                    f"{ratio:.0f}x {best.klass}'s)"
                )
    return out
