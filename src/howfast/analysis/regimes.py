"""The four numbers per target of the `regimes` plan, as "How fast was my database?" set them
side by side: TPS with a database that fits in memory, TPS with one 4x larger than memory, the
time to load the database, and the time to read a large table from a cold cache.

Pure: it reads a run's steps, by what their workloads declare (plugin/workload.py). Which
steps count:

- TPS: completed steps of a workload with a throughput that reads the loaded data (pgbench:
  `throughput_metric`, `reads_loaded_data`) at full speed (no `rate`), not warm-ups, on data
  loaded for the regime (`dataset` in-memory / on-disk in their params); tpcb-like when there
  is some, at its largest client count; repetitions are averaged.
- load time: the `load_metric` (`init_total_s`) of the latest completed load (pgbench-init) at
  the on-disk size (else of the largest load), with its phases.
- large read time: the `cold_read_metric` (`seqread_s`) of the completed cold reads
  (seqread), averaged.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from howfast.model import JSONValue, RunRecord, StepRecord
from howfast.plugin.registry import Plugin, find

TPS_REGIMES = ("in-memory", "on-disk")
PREFERRED_MODE = "tpcb-like"


@dataclass(frozen=True)
class RegimeTps:
    tps: float
    mode: str
    clients: int | None
    runs: int
    scale: int | None


@dataclass(frozen=True)
class Load:
    seconds: float
    scale: int | None
    db_size_bytes: int | None
    dataset: str | None
    phases: dict[str, float]
    memory_bytes: int | None
    memory_basis: str | None


@dataclass(frozen=True)
class LargeRead:
    seconds: float
    mbps: float | None
    table_bytes: int | None
    runs: int
    cold: bool | None  # None: not known (an existing server's device is not visible)


@dataclass
class RegimeRow:
    target: str
    tps: dict[str, RegimeTps] = field(default_factory=dict)  # by regime
    load: Load | None = None
    read: LargeRead | None = None

    @property
    def in_memory_tps(self) -> float | None:
        got = self.tps.get("in-memory")
        return got.tps if got else None

    @property
    def on_disk_tps(self) -> float | None:
        got = self.tps.get("on-disk")
        return got.tps if got else None

    def complete_enough(self) -> bool:
        """Worth a table: a large read, or TPS in both regimes."""
        return self.read is not None or len(self.tps) == len(TPS_REGIMES)


def _num(value: JSONValue) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: JSONValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _plugin(step: StepRecord) -> Plugin | None:
    return find(step.workload)


def _tps(step: StepRecord) -> float | None:
    """The step's throughput when it measured the most it could on the loaded data."""
    plugin = _plugin(step)
    if plugin is None or plugin.throughput_metric is None or not plugin.reads_loaded_data:
        return None
    if step.status != "completed" or not plugin.full_speed(step.all_params):
        return None
    return _num(step.metrics.get(plugin.throughput_metric))


def regime_tps(steps: list[StepRecord], regime: str) -> RegimeTps | None:
    mine = [s for s in steps if s.all_params.get("dataset") == regime and _tps(s) is not None]
    if not mine:
        return None
    modes = Counter(str(s.all_params.get("mode")) for s in mine)
    mode = PREFERRED_MODE if PREFERRED_MODE in modes else modes.most_common(1)[0][0]
    mine = [s for s in mine if str(s.all_params.get("mode")) == mode]
    clients = max((_int(s.all_params.get("clients")) or 0 for s in mine), default=0) or None
    mine = [s for s in mine if _int(s.all_params.get("clients")) == clients]
    values = [v for s in mine if (v := _tps(s)) is not None]
    return RegimeTps(
        tps=statistics.fmean(values),
        mode=mode,
        clients=clients,
        runs=len(values),
        scale=_int(mine[-1].all_params.get("scale")),
    )


def _load_metric(step: StepRecord) -> str | None:
    plugin = _plugin(step)
    return plugin.load_metric if plugin is not None else None


def _load_seconds(step: StepRecord) -> float | None:
    name = _load_metric(step)
    return _num(step.metrics.get(name)) if name and step.status == "completed" else None


def load(steps: list[StepRecord]) -> Load | None:
    inits = [s for s in steps if _load_seconds(s) is not None]
    on_disk = [s for s in inits if s.all_params.get("dataset") == "on-disk"]
    if on_disk:
        step = on_disk[-1]
    elif inits:
        step = max(inits, key=lambda s: _int(s.all_params.get("scale")) or 0)
    else:
        return None
    m = step.metrics
    total = _load_metric(step)
    phases = {
        key.removesuffix("_s"): float(v)
        for key, v in m.items()
        if key.endswith("_s") and key != total and isinstance(v, int | float)
    }
    dataset = step.all_params.get("dataset")
    basis = step.all_params.get("memory_basis")
    return Load(
        seconds=_load_seconds(step) or 0.0,
        scale=_int(step.all_params.get("scale")),
        db_size_bytes=_int(m.get("db_size_bytes")),
        dataset=str(dataset) if dataset is not None else None,
        phases=phases,
        memory_bytes=_int(step.all_params.get("memory_bytes")),
        memory_basis=str(basis) if basis is not None else None,
    )


def _read_seconds(step: StepRecord) -> float | None:
    plugin = _plugin(step)
    name = plugin.cold_read_metric if plugin is not None else None
    if not name or step.status != "completed" or step.all_params.get("cold", True) is not True:
        return None
    return _num(step.metrics.get(name))


def large_read(steps: list[StepRecord]) -> LargeRead | None:
    reads = [s for s in steps if _read_seconds(s) is not None]
    if not reads:
        return None
    seconds = statistics.fmean(_read_seconds(s) or 0.0 for s in reads)
    rates = [v for s in reads if (v := _num(s.metrics.get("seqread_mbps"))) is not None]
    verdicts = [s.metrics.get("cache_cold") for s in reads]
    cold = None if any(v is None for v in verdicts) else all(v is True for v in verdicts)
    return LargeRead(
        seconds=seconds,
        mbps=statistics.fmean(rates) if rates else None,
        table_bytes=_int(reads[-1].metrics.get("table_bytes")),
        runs=len(reads),
        cold=cold,
    )


def regimes_rows(run: RunRecord) -> list[RegimeRow]:
    """One row per target, in the run's order. Check `complete_enough` before showing."""
    names = [t.name for t in run.targets]
    names += [s.target for s in run.steps if s.target not in names]
    rows = []
    for name in dict.fromkeys(names):
        steps = [s for s in run.steps if s.target == name]
        row = RegimeRow(name, load=load(steps), read=large_read(steps))
        for regime in TPS_REGIMES:
            got = regime_tps(steps, regime)
            if got is not None:
                row.tps[regime] = got
        rows.append(row)
    return rows
