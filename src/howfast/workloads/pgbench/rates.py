"""Fixed-rate pgbench steps: resolve a fraction of the measured maximum into a rate. Whether
the rate was met, the objective and the curve's summary are derived when the run is read
(analysis/rate_verdicts.py, which also says what "the same curve" is).

Pure functions over params and earlier step records; the workload calls them.
"""

from __future__ import annotations

from collections.abc import Sequence

from howfast.analysis.rate_verdicts import curve_key
from howfast.model import JSONValue, StepRecord


def _same_curve(a: dict[str, JSONValue], b: dict[str, JSONValue]) -> bool:
    return curve_key(a) == curve_key(b)


def max_tps_before(params: dict[str, JSONValue], previous: Sequence[StepRecord]) -> float | None:
    """TPS of the latest completed full-speed step of the same curve."""
    for step in reversed(previous):
        if (
            step.workload == "pgbench"
            and step.params.get("curve_role") == "max"
            and step.status == "completed"
            and _same_curve(step.params, params)
        ):
            tps = step.metrics.get("tps")
            return float(tps) if isinstance(tps, int | float) else None
    return None


def resolve_rate(
    params: dict[str, JSONValue],
    previous: Sequence[StepRecord],
    first_target: Sequence[StepRecord] = (),
) -> float | None:
    """The offered rate of this step: its own `rate`, or `rate_fraction` of the maximum TPS
    measured just before, on this target or (`rate_basis: first-target`) on the run's first
    target. Raises ValueError when a fraction has nothing to be taken of."""
    rate = params.get("rate")
    if isinstance(rate, int | float):
        return float(rate)
    fraction = params.get("rate_fraction")
    if not isinstance(fraction, int | float):
        return None
    basis = first_target if params.get("rate_basis") == "first-target" else previous
    max_tps = max_tps_before(params, basis)
    if not max_tps:
        where = "on the run's first target" if basis is first_target else "before it"
        raise ValueError(f"no completed full-speed step {where} to take the rate fraction of")
    return max(1.0, round(float(fraction) * max_tps, 1))
