"""How numbers are written in every report: digits by unit, thousands separators, a mean with
its confidence interval, the coefficient of variation."""

from __future__ import annotations

import math

from howfast.analysis.metrics import metric
from howfast.analysis.stats import Stats

DASH = "–"
# Units whose values run into thousands: separators make them readable.
_GROUPED_UNITS = {"tx/s", "IOPS", "commits/s", "ops/s"}


def number(value: float | None, name: str) -> str:
    """A metric's value in its unit's precision: '12,345.6' (tx/s), '0.412' (ms); a dash for
    none, and for NaN or an infinity (no figure)."""
    if value is None or not math.isfinite(value):
        return DASH
    m = metric(name)
    if m.unit == "bytes":
        return mib(value)
    if m.unit in _GROUPED_UNITS:
        return f"{value:,.{m.digits}f}"
    return f"{value:.{m.digits}f}"


def mib(value: float | None) -> str:
    return DASH if value is None else f"{value / 1024**2:,.0f} MiB"


def mean_ci(stats: Stats | None, name: str) -> str:
    """'12,345.6 ± 210.4' (mean ± half the 95% confidence interval), or the value alone for
    a single repetition."""
    if stats is None:
        return DASH
    half = stats.ci_half
    text = number(stats.mean, name)
    if half is None:
        return text
    if metric(name).unit == "bytes":
        return f"{text} ± {half / 1024**2:,.0f}"
    return f"{text} ± {number(half, name)}"


def cv(stats: Stats | None) -> str:
    if stats is None or stats.cv is None:
        return DASH
    return f"{stats.cv:.1%}"


def ratio(value: float | None) -> str:
    """'1.320×'; a ratio past a million in three significant digits ('2.5e+09×'), not in
    as many digits as it has."""
    if value is None or not math.isfinite(value):
        return DASH
    return f"{value:.3g}×" if abs(value) >= 1e6 else f"{value:.3f}×"


def p_value(value: float | None) -> str:
    if value is None:
        return DASH
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def seconds_range(values: list[float]) -> str:
    """'3 s', '2–4 s': how many seconds were left out of each repetition."""
    if not values:
        return DASH
    low, high = min(values), max(values)
    return f"{low:g} s" if low == high else f"{low:g}–{high:g} s"
