"""Prometheus's HTTP API, as the --prometheus sampler uses it: PromQL selectors (pure),
response parsing (pure), counter arithmetic over raw samples (pure), and a small client on
urllib (one GET per query, a timeout, no retries).

API reference: https://prometheus.io/docs/prometheus/latest/querying/api/
"""

from __future__ import annotations

import itertools
import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

TIMEOUT_S = 10.0

DISK_COUNTERS = {
    "reads_completed": "read_ops",
    "writes_completed": "write_ops",
    "read_bytes": "read_bytes",
    "written_bytes": "write_bytes",
}
# postgres_exporter's pg_stat_database columns (with or without `_total`, by version).
PG_COUNTERS = {"xact_commit": "commits", "blks_read": "blks_read", "blks_hit": "blks_hit"}


# irate looks back this far for its two latest samples: any scrape interval up to a minute.
RATE_WINDOW = "2m"


class PromError(Exception):
    """The server could not be reached, or answered with an error."""


@dataclass(frozen=True)
class PromSeries:
    """One series of a response: its labels and (epoch seconds, value) points, in time order."""

    labels: dict[str, str]
    points: tuple[tuple[float, float], ...]

    @property
    def name(self) -> str:
        return self.labels.get("__name__", "")

    def describe(self) -> str:
        inner = ",".join(f'{k}="{v}"' for k, v in sorted(self.labels.items()) if k != "__name__")
        return f"{self.name}{{{inner}}}"


# --- PromQL (pure) ---------------------------------------------------------------------------


def string_literal(text: str) -> str:
    """A PromQL double-quoted string holding `text` exactly."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def alternatives(values: Iterable[str]) -> str:
    """A regex matching exactly one of `values` (PromQL anchors regexes at both ends)."""
    return "|".join(re.escape(v) for v in sorted(set(values)))


def disk_selector(devices: Iterable[str]) -> str:
    """node_exporter's disk counters of these devices (as /proc/diskstats names them)."""
    names = alternatives(f"node_disk_{c}_total" for c in DISK_COUNTERS)
    return (
        "{__name__=~"
        + string_literal(names)
        + ",device=~"
        + string_literal(alternatives(devices))
        + "}"
    )


def disk_rate_query(counter: str, devices: Iterable[str]) -> str:
    """Per-second rate of one node_exporter disk counter, per device and instance, between the
    two latest scrapes at each evaluation time (irate: the finest grain Prometheus holds)."""
    selector = f"node_disk_{counter}_total{{device=~{string_literal(alternatives(devices))}}}"
    return f"irate({selector}[{RATE_WINDOW}])"


def cpu_rate_query() -> str:
    """CPU seconds per second by mode, all CPUs summed, per exporter instance."""
    return f"sum by (instance, mode) (irate(node_cpu_seconds_total[{RATE_WINDOW}]))"


def pg_rate_query(column: str) -> str:
    """postgres_exporter's pg_stat_database column (named with or without `_total`, by
    exporter version) per second, summed over databases, per instance."""
    names = string_literal(f"pg_stat_database_{column}(_total)?")
    return f"sum by (instance) (irate({{__name__=~{names}}}[{RATE_WINDOW}]))"


def range_selector(selector: str, seconds: float) -> str:
    """`selector[Ns]`: the raw samples of the last N seconds (an instant query of this returns
    every scraped sample with its own time stamp)."""
    return f"{selector}[{max(1, math.ceil(seconds))}s]"


# --- responses (pure) ------------------------------------------------------------------------


def parse_response(text: str) -> list[PromSeries]:
    """The series of a /api/v1/query or /api/v1/query_range answer (a matrix or a vector).
    Raises PromError for an error answer."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PromError(f"not a Prometheus API answer: {exc}") from None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        error = doc.get("error") if isinstance(doc, dict) else None
        kind = doc.get("errorType") if isinstance(doc, dict) else None
        raise PromError(f"{kind or 'error'}: {error or text[:200]}")
    data = doc.get("data") or {}
    result_type = data.get("resultType")
    out = []
    for item in data.get("result") or []:
        labels = {str(k): str(v) for k, v in (item.get("metric") or {}).items()}
        if result_type == "matrix":
            raw = item.get("values") or []
        elif result_type == "vector":
            raw = [item.get("value")] if item.get("value") else []
        else:
            raise PromError(f"unexpected result type {result_type!r}")
        points = tuple((float(ts), float(v)) for ts, v in raw)
        out.append(PromSeries(labels, points))
    return out


# --- counters (pure) -------------------------------------------------------------------------


def increase(before: float, after: float) -> float:
    """How much a counter grew; a reset (after < before) counts from zero, as PromQL does."""
    return after - before if after >= before else after


def value_at(points: Sequence[tuple[float, float]], at: float) -> float | None:
    """A counter's value at time `at`, linearly interpolated between the raw samples around
    it; None when `at` is not between two samples. Counter resets in between are not
    interpolated (None)."""
    for (t0, v0), (t1, v1) in itertools.pairwise(points):
        if t0 <= at <= t1:
            if v1 < v0:
                return None
            if t1 == t0:
                return v0
            return v0 + (v1 - v0) * (at - t0) / (t1 - t0)
    return None


def window_increase(
    points: Sequence[tuple[float, float]], start: float, end: float
) -> float | None:
    """How much a counter grew between `start` and `end`, from raw samples: interpolated at
    both ends, with any counter reset in between counted from zero."""
    if len(points) < 2:
        return None
    a, b = value_at(points, start), value_at(points, end)
    if a is None or b is None:
        return None
    inner = [v for t, v in points if start < t < end]
    total, previous = 0.0, a
    for v in [*inner, b]:
        total += increase(previous, v)
        previous = v
    return total


# --- the client ------------------------------------------------------------------------------


class PromClient:
    def __init__(self, url: str, timeout_s: float = TIMEOUT_S) -> None:
        self.base = url.rstrip("/")
        self.timeout_s = timeout_s

    def _get(self, path: str, params: dict[str, str]) -> list[PromSeries]:
        url = f"{self.base}{path}?{urllib.parse.urlencode(params)}"
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:  # 400/422/503 carry Prometheus's own message
            return parse_response(exc.read().decode(errors="replace"))
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise PromError(f"{self.base}: {reason}") from None
        return parse_response(text)

    def query(self, expr: str, at: float) -> list[PromSeries]:
        return self._get("/api/v1/query", {"query": expr, "time": f"{at:.3f}"})

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[PromSeries]:
        params = {
            "query": expr,
            "start": f"{start:.3f}",
            "end": f"{end:.3f}",
            "step": f"{max(step, 0.001):g}",
        }
        return self._get("/api/v1/query_range", params)
