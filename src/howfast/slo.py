"""Failure objectives as people write them: `--slo rto=10s,rpo=0` (docs/events.md, trials).

`rto`: the longest outage a trial may have (a duration: "10s", "500ms", "0"); `rpo`: the
most acknowledged commits a trial may lose (a count: "0", "5"; howfast counts commits, not
seconds of WAL). The same `--slo` of `howfast run` also takes a latency objective (`p99=10ms`,
rates.py): `split_slo` sends each part where it belongs.

A leaf of the vocabulary: the verdict itself is derived when a run is read
(analysis/trials.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from howfast.errors import UsageError
from howfast.rates import SLO_METRICS
from howfast.units import quote

FAILURE_KEYS = ("rto", "rpo")
RUN_KEY = "slo"  # where `run --slo rto=...` is kept: a key of the run's environment
_DURATION = re.compile(r"([-+]?(?:\d+(?:\.\d+)?|\.\d+))\s*(ms|s|m|min|h)?")
_SECONDS = {None: 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "min": 60.0, "h": 3600.0}
_COUNT = re.compile(r"[-+]?\d+")


@dataclass(frozen=True)
class FailureSlo:
    """What every trial must meet; None: that objective was not given."""

    rto_s: float | None = None  # the longest outage (downtime), in seconds
    rpo_commits: int | None = None  # the most acknowledged commits lost

    @property
    def text(self) -> str:
        """'rto=10s,rpo=0': the canonical form, as stored with a run."""
        parts = []
        if self.rto_s is not None:
            parts.append(f"rto={_seconds_text(self.rto_s)}")
        if self.rpo_commits is not None:
            parts.append(f"rpo={self.rpo_commits}")
        return ",".join(parts)


def _seconds_text(seconds: float) -> str:
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000, 3):g}ms"


def _entries(text: str, option: str) -> list[tuple[str, str]]:
    entries = []
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep:
            raise UsageError(f"{option} {quote(text)}: {quote(part.strip())} is not KEY=VALUE")
        entries.append((key.strip().lower(), value.strip()))
    if not entries:
        raise UsageError(f"{option}: empty; expected e.g. rto=10s,rpo=0")
    return entries


def _rto(value: str, option: str) -> float:
    match = _DURATION.fullmatch(value.lower())
    if match is None:
        raise UsageError(
            f"{option} rto={value}: rto is the longest outage allowed, a duration such as "
            "10s or 500ms"
        )
    seconds = float(match.group(1)) * _SECONDS[match.group(2)]
    if seconds < 0 or not math.isfinite(seconds):
        raise UsageError(f"{option} rto={value}: rto must not be negative")
    return seconds


def _rpo(value: str, option: str) -> int:
    if _COUNT.fullmatch(value) is None:
        raise UsageError(
            f"{option} rpo={value}: rpo counts acknowledged commits lost per trial (e.g. "
            "rpo=0), not a duration"
        )
    commits = int(value)
    if commits < 0:
        raise UsageError(f"{option} rpo={value}: rpo must not be negative")
    return commits


def split_slo(text: str, option: str = "--slo") -> tuple[str | None, FailureSlo | None]:
    """(the latency objective's text, for rates.parse_slo; the failure objectives), each
    None when not given. Errors name the key: unknown, a bad duration or count, negative,
    given twice."""
    latency: list[str] = []
    found: dict[str, str] = {}
    for key, value in _entries(text, option):
        if key in SLO_METRICS:
            latency.append(f"{key}={value}")
        elif key in FAILURE_KEYS:
            if key in found:
                raise UsageError(f"{option} {quote(text)}: {key} is given twice")
            found[key] = value
        else:
            raise UsageError(
                f"{option} {quote(text)}: unknown key {quote(key)}; expected rto, rpo "
                "(failure objectives) or a latency percentile such as p99"
            )
    if len(latency) > 1:
        raise UsageError(f"{option} {quote(text)}: one latency objective at a time")
    failure = None
    if found:
        failure = FailureSlo(
            rto_s=_rto(found["rto"], option) if "rto" in found else None,
            rpo_commits=_rpo(found["rpo"], option) if "rpo" in found else None,
        )
    return (latency[0] if latency else None), failure


def parse_failure_slo(text: str, option: str = "--slo") -> FailureSlo:
    """`rto=10s,rpo=0` alone: what `results show`, `compare` and `report` take."""
    latency, failure = split_slo(text, option)
    if latency is not None:
        raise UsageError(
            f"{option} {quote(text)}: {latency} is a latency objective, given to "
            "`howfast run --slo`; here only rto and rpo (failure objectives)"
        )
    assert failure is not None  # split_slo refuses an empty text
    return failure
