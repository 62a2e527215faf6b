"""Flat rows of `howfast export csv|ndjson`: one row per step and figure, and with `--series`
one per per-second sample, for benchmark pipelines and spreadsheets (docs/commands/export.md).
Pure: derived runs in, rows and their text out."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Iterator, Sequence

from howfast.analysis.metrics import METRICS
from howfast.model import JSONValue, RunRecord, StepRecord

# The columns, in this order; `t_s` only with --series (empty on a step's figures).
COLUMNS = (
    "run",
    "target",
    "kind",
    "workload",
    "mode",
    "clients",
    "repetition",
    "metric",
    "value",
    "unit",
    "step",
    "status",
)
SERIES_COLUMN = "t_s"

# Units of figures the catalogue does not list (derived I/O and CPU figures, series), by
# the end of their names; the catalogue's own units come first.
_SUFFIX_UNITS = (
    ("_per_s", "/s"),
    ("_ms", "ms"),
    ("_mbps", "MB/s"),
    ("_iops", "IOPS"),
    ("_pct", "%"),
    ("_bytes", "bytes"),
    ("_kib", "KiB"),
    ("_s", "s"),
    ("tps", "tx/s"),
)


def unit_of(name: str) -> str:
    """'tps' -> 'tx/s', 'io.data.write_mbps' -> 'MB/s', 'wal_records' -> ''."""
    known = METRICS.get(name)
    if known is not None:
        return known.unit
    for suffix, unit in _SUFFIX_UNITS:
        if name.endswith(suffix):
            return unit
    return ""


def _number(value: object) -> float | int | None:
    """A figure's value as a number: booleans as 1/0; lists, texts and nulls are not rows."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return None


def _step_columns(run: RunRecord, step: StepRecord, kinds: dict[str, str]) -> dict[str, JSONValue]:
    params = step.all_params
    mode = params.get("mode", params.get("profile"))
    repetition = params.get("repetition", 1)
    return {
        "run": str(run.id),
        "target": step.target,
        "kind": kinds.get(step.target, ""),
        "workload": step.workload,
        "mode": mode if isinstance(mode, str) else None,
        "clients": params.get("clients") if isinstance(params.get("clients"), int) else None,
        "repetition": repetition if isinstance(repetition, int) else None,
    }


def run_rows(runs: Sequence[RunRecord], *, series: bool = False) -> Iterator[dict[str, JSONValue]]:
    """Every numeric figure of every step (warm-ups left out, as from every figure), in step
    order; with `series`, each step's per-second samples after its figures."""
    for run in runs:
        kinds = {t.name: t.kind for t in run.targets}
        for step in run.steps:
            if step.all_params.get("warmup") is True:
                continue
            base = _step_columns(run, step, kinds)
            tail: dict[str, JSONValue] = {"step": str(step.id), "status": step.status}
            if series:
                tail[SERIES_COLUMN] = None
            for name, raw in step.metrics.items():
                value = _number(raw)
                if value is not None:
                    yield {**base, "metric": name, "value": value, "unit": unit_of(name), **tail}
            if not series:
                continue
            for name, points in step.series.items():
                unit = unit_of(name)
                for point in points:
                    if math.isfinite(point.value):
                        yield {
                            **base,
                            "metric": name,
                            "value": point.value,
                            "unit": unit,
                            **tail,
                            SERIES_COLUMN: point.t,
                        }


def columns(series: bool) -> tuple[str, ...]:
    return (*COLUMNS, SERIES_COLUMN) if series else COLUMNS


def csv_chunks(rows: Iterable[dict[str, JSONValue]], series: bool) -> Iterator[str]:
    """The header, then a line per row (RFC 4180 quoting; an empty field for null)."""
    names = columns(series)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(names)
    for row in rows:
        writer.writerow(["" if row.get(n) is None else row.get(n) for n in names])
        if buffer.tell() > 1 << 16:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def ndjson_chunks(rows: Iterable[dict[str, JSONValue]], series: bool) -> Iterator[str]:
    """One JSON object per line, every column in each (null where there is no value)."""
    names = columns(series)
    for row in rows:
        yield json.dumps({n: row.get(n) for n in names}) + "\n"
