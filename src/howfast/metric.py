"""A metric's catalogue entry: what a workload declares of each figure it reports (its plan
module), and what statistics, comparisons and reports read (analysis/metrics.py)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str
    # True: more is better (TPS, IOPS); False: less is better (latency, time); None: neither.
    higher_is_better: bool | None
    digits: int = 2  # decimals worth printing in this unit


# -- what a figure may be ------------------------------------------------------------------------
# One rule per kind of figure, checked wherever a figure enters the store from outside a run:
# the tools' parsers (fio's JSON, pgbench's text) and `howfast import run`'s run files. The
# bounds are physical, not typical: past them a value is a typo, an edit or a sentinel, never
# a measurement (docs/json.md#figures).

LARGEST = 2**63 - 1  # what SQLite's INTEGER and a signed 64-bit counter hold


@dataclass(frozen=True)
class Bounds:
    """What a figure of one kind may be: a finite number from `low` to `high`, a whole
    number when `integer`; `kind` names it in messages ("a rate")."""

    kind: str
    low: float
    high: float
    integer: bool = False

    def fault(self, value: object) -> str | None:
        """Why `value` cannot be such a figure ('-500 is negative'), or None when it can."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{shown_value(value)} is not a number"
        if not math.isfinite(value):
            return f"{shown_value(value)} is not a finite number"
        if self.integer and isinstance(value, float) and not value.is_integer():
            return f"{value!r} is not a whole number ({self.kind})"
        if value < self.low:
            return f"{value!r} is negative" if self.low == 0 else f"{value!r} is below {self.low:g}"
        if value > self.high:
            return f"{value!r} is above {self.high:g}, more than {self.kind} can be"
        return None


def shown_value(value: object) -> str:
    """A value as a message quotes it: JSON's spelling, shortened."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, float) and not math.isfinite(value):  # as JSON parsers spell them
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


_DAY_MS = 86_400_000
RATE = Bounds("a rate (per second)", 0, 1e9)  # 10^9 transactions or I/Os a second: no server
BANDWIDTH = Bounds("a bandwidth in MB/s", 0, 1e7)  # 10 TB/s
LATENCY_MS = Bounds("a latency in ms", 0, 7 * _DAY_MS)  # a week: past it, nothing answered
LATENCY_US = Bounds("a latency in µs", 0, 7 * _DAY_MS * 1000)
SECONDS = Bounds("a duration in seconds", 0, 1e8)  # three years
# Sizes and counts are not required whole: those read from Prometheus are increase()s, which
# extrapolate (a fio step's 7340032.5 bytes written), and a stored figure refused by a rule
# is hidden when the run is read
BYTES = Bounds("a size in bytes", 0, LARGEST)
COUNT = Bounds("a count", 0, LARGEST)
WHOLE_COUNT = Bounds("a count", 0, LARGEST, integer=True)  # what a tool counted itself
HOW_MANY = Bounds("a number of clients, jobs or repetitions", 1, 2**31 - 1, integer=True)
PERCENT = Bounds("a percentage", 0, 100)
# Any other figure: finite, and small enough that sums and ratios of them stay finite.
ANY = Bounds("a figure", -LARGEST, LARGEST)
NON_NEGATIVE = Bounds("a figure", 0, LARGEST)

# The rule of each unit a workload declares its metrics in (plugin metrics): their names
# say the same (tests/unit/test_runfile_values.py).
METRIC_UNITS_BOUNDS: dict[str, Bounds] = {
    **dict.fromkeys(("tx/s", "IOPS", "ops/s", "commits/s"), RATE),
    "MB/s": BANDWIDTH,
    "ms": LATENCY_MS,
    "s": SECONDS,
    "bytes": BYTES,
}
_EXACT: dict[str, Bounds] = {
    **dict.fromkeys(("tps", "rate", "rate_offered"), RATE),
    **dict.fromkeys(("clients", "jobs", "repetition", "numjobs", "iodepth"), HOW_MANY),
    **dict.fromkeys(
        (
            "transactions",
            "failed",
            "skipped",
            "retried",
            "retries",
            "late",
            "checkpoints",
            "scale",
            "partitions",
            "curve_rates",
            "instance",
        ),
        WHOLE_COUNT,
    ),
    **dict.fromkeys(("fillfactor", "rwmixread"), PERCENT),
}
# By the name's ending, first match wins: howfast names figures by their unit.
_SUFFIXES: tuple[tuple[str, Bounds], ...] = (
    ("_per_s", NON_NEGATIVE),
    ("_ops_s", RATE),
    ("_tps", RATE),
    ("_rate", RATE),
    ("_iops", RATE),
    ("_mbps", BANDWIDTH),
    ("_ms", LATENCY_MS),
    ("_us", LATENCY_US),
    ("_s", SECONDS),
    ("_bytes", BYTES),
    ("_ios", COUNT),
)


def bounds_for(name: str) -> Bounds | None:
    """The rule of a metric or param by its name, None for a name no rule covers (a figure
    whose sign means something, such as a change, is one of those)."""
    if name in _EXACT:
        return _EXACT[name]
    if name.startswith("tps_"):  # tps_including_connections, tps_during_checkpoints
        return RATE
    if "change" in name or "delta" in name:
        return None
    return next((bounds for suffix, bounds in _SUFFIXES if name.endswith(suffix)), None)


def series_bounds(name: str) -> Bounds:
    """A per-second series by its name's last part ("io.data.write_iops": a rate), any
    finite figure for other names; averages over a second, so never only whole numbers."""
    bounds = bounds_for(name.rsplit(".", 1)[-1]) or ANY
    return Bounds(bounds.kind, bounds.low, bounds.high) if bounds.integer else bounds
