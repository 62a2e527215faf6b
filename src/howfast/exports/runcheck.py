"""The values of a run file, checked before anything is stored (docs/json.md#figures).

The structure (which keys, which types) is pydantic's part, in runfile.py; this module holds
what a structure cannot say: every number finite and within what such a figure can be (the
rules of metric.py, the ones the tools' parsers apply), times as ISO dates, and a document
neither deeper nor larger than a run file can be. Each fault is named by its JSON path, and
the first one refuses the whole file. Pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from itertools import accumulate, repeat
from operator import sub
from typing import Any

from howfast.metric import (
    ANY,
    COUNT,
    LATENCY_US,
    SECONDS,
    Bounds,
    bounds_for,
    series_bounds,
    shown_value,
)

# A run file's deepest value (a statement of a step's metrics, an event's figures in a
# section) is about ten levels down; 64 leaves room for what a sampler adds, and far less
# than the recursion a parser or a printer of a deeper document would need.
MAX_DEPTH = 64
# A run file holds every per-second series; a day-long run of a few steps is tens of MB.
MAX_CHARS = 256 * 1024 * 1024
SERIES_TIME = Bounds("a time in seconds", -SECONDS.high, SECONDS.high)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_STEP = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
_SHOWN_LEVELS = 6  # of a value nested too deep, the keys of its path shown
# Keys whose values are text whatever their names say: PostgreSQL's settings as `SHOW` prints
# them ("10s", "8MB").
TEXT_KEYS = frozenset({"settings"})


class FigureFault(ValueError):
    """A value of a run file that cannot be stored: where it is and why."""

    def __init__(self, where: str, why: str) -> None:
        self.where = where
        self.why = why
        super().__init__(f"{where}: {why}")


def check_depth(raw: Any) -> None:
    """No value deeper than MAX_DEPTH: FigureFault names the outermost few keys above it."""
    stack: list[tuple[Any, _Place, int]] = [(raw, _Place(None, ""), 0)]
    while stack:
        node, place, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise FigureFault(place.shown(_SHOWN_LEVELS), f"nested deeper than {MAX_DEPTH} levels")
        children = node.items() if isinstance(node, Mapping) else enumerate(node)
        stack.extend(
            (value, _Place(place, key), depth + 1)
            for key, value in children
            if isinstance(value, Mapping | list)  # only containers go deeper
        )


def check_document(raw: Any) -> None:
    """Every number anywhere finite and within ±2^63 (beyond, sums and ratios of them
    overflow): FigureFault at the first found (an object's own numbers before what is nested
    in it). A step's series and histograms are left to check_runs, which checks each of their
    values by its own rule (they are most of a run file's values)."""
    stack: list[tuple[Any, _Place]] = [(raw, _Place(None, ""))]
    while stack:
        node, place = stack.pop()
        children = list(node.items() if isinstance(node, Mapping) else enumerate(node))
        for key, value in children:
            if isinstance(value, int | float) and not isinstance(value, bool):
                fault = ANY.fault(value)
                if fault is not None:
                    raise FigureFault(_Place(place, key).shown(), fault)
        stack.extend(
            (value, _Place(place, key))
            for key, value in reversed(children)
            if isinstance(value, Mapping | list) and not _per_second(place, key)
        )


def _per_second(place: _Place, key: object) -> bool:
    """Whether `key` of `place` is a step's series or histograms (runs[r].steps[s].series)."""
    return key in ("series", "histograms") and (
        place.parent is not None and place.parent.key == "steps"
    )


def text_depth(text: str) -> int:
    """How deep the JSON text nests, counted on its brackets outside strings, in C loops
    (a run file's series are millions of brackets): before a parser recurses into it."""
    brackets = _NOT_BRACKETS.sub("", _STRING.sub("", text)).encode()
    steps = brackets.translate(_STEP)  # an opening bracket 2, a closing one 0: then minus 1
    return max(accumulate(map(sub, steps, repeat(1))), default=0)


class _Place:
    """Where a value is, as its parent and its key: the path is spelled only for a fault
    (a run file holds millions of values)."""

    __slots__ = ("key", "parent")

    def __init__(self, parent: _Place | None, key: object) -> None:
        self.parent = parent
        self.key = key

    def shown(self, levels: int | None = None) -> str:
        keys: list[object] = []
        place: _Place | None = self
        while place is not None and place.parent is not None:
            keys.append(place.key)
            place = place.parent
        where = ""
        for key in keys[::-1][:levels]:  # outermost first; all of them when levels is None
            where = f"{where}[{key}]" if isinstance(key, int) else _key(where, str(key))
        return where or "the document"


def check_runs(raw: Mapping[str, Any]) -> None:
    """The figures and times of a run file whose structure pydantic accepted."""
    _date(raw.get("exported_at"), "exported_at")
    for r, run in enumerate(raw["runs"]):
        where = f"runs[{r}]"
        _date(run["started_at"], f"{where}.started_at")
        if run["finished_at"] is not None:
            _date(run["finished_at"], f"{where}.finished_at")
        for s, step in enumerate(run["steps"]):
            _check_step(step, f"{where}.steps[{s}]")


def _check_step(step: Mapping[str, Any], where: str) -> None:
    _date(step["started_at"], f"{where}.started_at")
    _date(step["finished_at"], f"{where}.finished_at")
    for part in ("metrics", "asked", "resolved"):
        check_named(step[part], f"{where}.{part}")
    for name, points in step["series"].items():
        check_series(name, points, f"{where}.series")
    check_histograms(step["histograms"], f"{where}.histograms")


def check_histograms(histograms: Mapping[str, Mapping[Any, Any]], where: str) -> None:
    """Latency histograms: values in µs from 0 to a week, counts whole and not negative."""
    for name, counts in histograms.items():
        path = _key(where, name)
        for key, count in counts.items():
            _check(LATENCY_US, _whole(key), f"{path} key {shown_value(key)}")
            _check(COUNT, count, f'{path}["{key}"]')


def check_series(name: str, points: Sequence[Sequence[Any]], where: str) -> None:
    """A series' [t, value] pairs: times within a few years, values by the rule of the
    name's last part; null (NaN) is a second with no value."""
    bounds = series_bounds(name)
    for i, (t, value) in enumerate(points):
        fault = SERIES_TIME.fault(t)
        if fault is not None:
            raise FigureFault(f"{_key(where, name)}[{i}][0]", fault)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        fault = bounds.fault(value)
        if fault is not None:
            raise FigureFault(f"{_key(where, name)}[{i}][1]", fault)


def check_named(figures: Mapping[str, Any], where: str) -> None:
    """Each value of `figures` by the rule its name gives (metric.bounds_for), in nested
    objects and lists too (a step's statements, a fleet's I/O limits); null is a figure not
    measured. Names no rule covers are held to check_document's."""
    for path, name, value in _named_values(figures, where):
        bounds = bounds_for(name)
        if bounds is not None and value is not None:
            _check(bounds, value, path)


def _named_values(node: Mapping[str, Any], where: str) -> Iterator[tuple[str, str, Any]]:
    for key, value in node.items():
        path = _key(where, str(key))
        if key in TEXT_KEYS:
            continue
        if isinstance(value, Mapping):
            yield from _named_values(value, path)
        elif isinstance(value, list) and any(isinstance(v, Mapping) for v in value):
            for i, item in enumerate(value):
                if isinstance(item, Mapping):
                    yield from _named_values(item, f"{path}[{i}]")
        else:
            yield path, str(key), value


def _whole(key: object) -> object:
    """A histogram key as the integer it spells, else as it is (then not a number)."""
    if isinstance(key, int):
        return key
    try:
        return int(str(key))
    except ValueError:
        return key


def _check(bounds: Bounds, value: object, where: str) -> None:
    fault = bounds.fault(value)
    if fault is not None:
        raise FigureFault(where, fault)


def _date(value: object, where: str) -> None:
    """An ISO 8601 date and time, as howfast writes them ('2026-01-01T10:00:00+00:00')."""
    try:
        if not isinstance(value, str):
            raise ValueError
        datetime.fromisoformat(value)
    except ValueError:
        raise FigureFault(where, f"{shown_value(value)} is not an ISO 8601 date and time") from None


def _key(where: str, key: str) -> str:
    plain = key.isidentifier()
    if not where:
        return key if plain else f'["{key}"]'
    return f"{where}.{key}" if plain else f'{where}["{key}"]'
