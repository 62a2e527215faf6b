"""The vocabulary of rate-limited steps, shared by plans, the pgbench workload, analysis and
reports: a latency objective (`--slo p99=10ms`) and how a step's rate reads in a table."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from howfast.errors import UsageError
from howfast.model import JSONValue

SLO_METRICS = {
    "avg": "latency_avg_ms",
    "p50": "latency_p50_ms",
    "p90": "latency_p90_ms",
    "p95": "latency_p95_ms",
    "p99": "latency_p99_ms",
    "p99.9": "latency_p999_ms",
    "p999": "latency_p999_ms",
    "max": "latency_max_ms",
}
_UNITS_MS = {"us": 0.001, "µs": 0.001, "ms": 1.0, "s": 1000.0}


@dataclass(frozen=True)
class Slo:
    text: str  # as the user wrote it, e.g. "p99=10ms"
    metric: str  # the metric it reads, e.g. "latency_p99_ms"
    limit_ms: float


def parse_slo(text: str) -> Slo:
    """'p99=10ms', 'p95=2.5ms', 'avg=500us'."""
    match = re.fullmatch(r"\s*([a-z0-9.]+)\s*=\s*([0-9]*\.?[0-9]+)\s*(us|µs|ms|s)?\s*", text)
    if not match or match.group(1) not in SLO_METRICS:
        raise UsageError(
            f"--slo {text!r}: expected e.g. p99=10ms; percentiles: "
            + ", ".join(k for k in SLO_METRICS if k != "p999")
        )
    limit = float(match.group(2)) * _UNITS_MS[match.group(3) or "ms"]
    if limit <= 0:
        raise UsageError(f"--slo {text!r}: the limit must be above zero")
    return Slo(text.strip(), SLO_METRICS[match.group(1)], limit)


def rate_label(params: Mapping[str, JSONValue]) -> str | None:
    """'rate 500/s', 'rate 50% of the maximum', 'full speed' (a rate curve's first run)."""
    if isinstance(params.get("rate_fraction"), int | float):
        whose = "the first target's " if params.get("rate_basis") == "first-target" else ""
        return f"rate {float(params['rate_fraction']):.0%} of {whose}the maximum"
    if params.get("rate") is not None:
        return f"rate {params['rate']}/s"
    if params.get("curve_role") == "max":
        return "full speed"
    return None
