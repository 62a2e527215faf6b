"""A metric's catalogue entry: what a workload declares of each figure it reports (its plan
module), and what statistics, comparisons and reports read (analysis/metrics.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str
    # True: more is better (TPS, IOPS); False: less is better (latency, time); None: neither.
    higher_is_better: bool | None
    digits: int = 2  # decimals worth printing in this unit
