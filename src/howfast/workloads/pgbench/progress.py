"""pgbench's per-second progress lines (`-P`): one point each, and a run's points held as
columns of machine numbers, since a run of many days prints a million of them. Pure."""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import overload

from howfast.workloads.pgbench.grammar import PROGRESS, PROGRESS_REST


@dataclass(frozen=True)
class ProgressPoint:
    """One -P line. `t` is seconds since the start, or a Unix time with --progress-timestamp.
    pgbench 10 prints "nan" latencies for an interval without transactions; they become 0.0, which
    is what later versions print."""

    t: float
    tps: float
    latency_ms: float
    stddev_ms: float | None = None
    lag_ms: float | None = None
    skipped: int | None = None
    failed: int | None = None
    retried: int | None = None
    retries: int | None = None


Counts = tuple[int | None, int | None, int | None, int | None]  # skipped, failed, retried, retries
_NO_COUNTS: Counts = (None, None, None, None)


class ProgressSeries(Sequence[ProgressPoint]):
    """A run's progress points, in order, as columns: `t`, `tps`, `latency_ms`; stddev and
    lag (NaN where a point has none) once a point has them; and the counts (skipped, failed,
    retried, retries) as the index of their combination in a table, since few combinations
    recur. A point is made when it is read."""

    def __init__(self, points: Iterable[ProgressPoint] = ()) -> None:
        self.t = array("d")
        self.tps = array("d")
        self.latency_ms = array("d")
        self._stddev: array[float] | None = None
        self._lag: array[float] | None = None
        self._counts = array("I")
        self._count_table: list[Counts] = [_NO_COUNTS]
        self._count_index: dict[Counts, int] = {_NO_COUNTS: 0}
        for p in points:
            counts = (p.skipped, p.failed, p.retried, p.retries)
            self.add(p.t, p.tps, p.latency_ms, p.stddev_ms, p.lag_ms, counts)

    def add(
        self,
        t: float,
        tps: float,
        latency_ms: float,
        stddev_ms: float | None,
        lag_ms: float | None,
        counts: Counts,
    ) -> None:
        if stddev_ms is not None or self._stddev is not None:
            if self._stddev is None:
                self._stddev = _nans(len(self.t))
            self._stddev.append(math.nan if stddev_ms is None else stddev_ms)
        if lag_ms is not None or self._lag is not None:
            if self._lag is None:
                self._lag = _nans(len(self.t))
            self._lag.append(math.nan if lag_ms is None else lag_ms)
        index = self._count_index.get(counts)
        if index is None:
            index = self._count_index[counts] = len(self._count_table)
            self._count_table.append(counts)
        self._counts.append(index)
        self.t.append(t)
        self.tps.append(tps)
        self.latency_ms.append(latency_ms)

    def add_match(self, m: re.Match[str]) -> None:
        """The point of a progress line matched by grammar.PROGRESS."""
        t, tps, latency, stddev, rest = m.group("t", "tps", "lat", "stddev", "rest")
        lag, counts = rest_figures(rest)
        deviation = None if stddev is None else float(stddev)
        if "n" in t or "n" in tps or "n" in latency or (stddev is not None and "n" in stddev):
            # "nan" (pgbench 10 on an empty interval) is 0.0; "inf" stays what it is
            deviation = None if stddev is None else number(stddev)
            self.add(number(t), number(tps), number(latency), deviation, lag, counts)
        else:
            self.add(float(t), float(tps), float(latency), deviation, lag, counts)

    def drop_last(self) -> None:
        """Forget the last point (a wrapped line's first piece, read again whole)."""
        for column in (self.t, self.tps, self.latency_ms, self._counts, self._stddev, self._lag):
            if column is not None:
                column.pop()

    def __len__(self) -> int:
        return len(self.t)

    @overload
    def __getitem__(self, index: int) -> ProgressPoint: ...
    @overload
    def __getitem__(self, index: slice) -> list[ProgressPoint]: ...
    def __getitem__(self, index: int | slice) -> ProgressPoint | list[ProgressPoint]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = range(len(self.t))[index]  # negative indexes, and IndexError past the end
        skipped, failed, retried, retries = self._count_table[self._counts[i]]
        return ProgressPoint(
            self.t[i],
            self.tps[i],
            self.latency_ms[i],
            stddev_ms=_value(self._stddev, i),
            lag_ms=_value(self._lag, i),
            skipped=skipped,
            failed=failed,
            retried=retried,
            retries=retries,
        )

    def __iter__(self) -> Iterator[ProgressPoint]:
        return (self[i] for i in range(len(self.t)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ProgressSeries({len(self)} points)"


def _nans(count: int) -> array[float]:
    return array("d", [math.nan]) * count


def _value(column: array[float] | None, i: int) -> float | None:
    if column is None or math.isnan(column[i]):
        return None
    return column[i]


def number(text: str) -> float:
    """A printed number; NaN (pgbench 10 on an empty interval) becomes 0.0."""
    value = float(text)
    return 0.0 if value != value else value  # NaN is the one value unequal to itself


@lru_cache(maxsize=4096)
def rest_figures(rest: str) -> tuple[float | None, Counts]:
    """lag and (skipped, failed, retried, retries) from what follows "stddev X" on a progress
    line (", 0 failed, lag 0.308 ms, 49 skipped"): the same few texts recur in a long run."""
    found: dict[str, str] = {}
    for m in PROGRESS_REST.finditer(rest):
        for key, value in m.groupdict().items():
            if value is not None:
                found.setdefault(key, value)

    def count(key: str) -> int | None:
        return int(found[key]) if key in found else None

    lag = number(found["lag"]) if "lag" in found else None
    return lag, (count("skipped"), count("failed"), count("retried"), count("retries"))


def progress_point(line: str) -> ProgressPoint | None:
    """The point of a cleaned progress line; None for any other line."""
    m = PROGRESS.match(line)
    if m is None:
        return None
    series = ProgressSeries()
    series.add_match(m)
    return series[0]
