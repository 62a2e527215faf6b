"""The run file of `howfast export json` and `howfast import run` (docs/json.md#run-files).

A run file holds runs as they are stored: what was measured (the tools' figures, the samplers'
sections, every per-second series and histogram), what was asked and resolved, warnings and
errors. Derived figures and verdicts are not in it: like those of any run, they are derived
again when the imported run is read, so the copy shows the same figures and verdicts as the
original. Pure: records in, a JSON document out, and back, with every fault in the file named
by where it is: its structure checked here, its values in runcheck.py; its texts come back
with their passwords masked (redact.py), as a measured run's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from howfast.errors import UsageError
from howfast.exports import runcheck
from howfast.metric import shown_value
from howfast.model import JSONValue, RunRecord, Sample, StepRecord, TargetRecord
from howfast.redact import redact_dsn

FORMAT = "howfast-runs"
VERSION = 1  # a new key in the file is a new version: this one refuses keys it does not know
FINAL_STATUSES = ("completed", "failed", "aborted")


def export_document(
    runs: list[RunRecord], *, source_store: str, exported_at: str, howfast_version: str
) -> dict[str, JSONValue]:
    """The run file of `runs`, read as stored (not derived) with their series and
    histograms. A run still `running` is refused: its copy would miss the steps to come."""
    for run in runs:
        if run.status not in FINAL_STATUSES:
            raise UsageError(
                f"run {run.id} is {run.status}: export it once it has ended",
                "see `howfast results list`",
            )
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": exported_at,
        "howfast_version": howfast_version,
        "source": {"store": source_store},
        "runs": [run_entry(run) for run in runs],
    }


def run_entry(run: RunRecord) -> dict[str, JSONValue]:
    return {
        "id": str(run.id),
        "plan": run.plan,
        "label": run.label,
        "status": run.status,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "environment": run.environment,
        "targets": [
            {
                "name": t.name,
                "kind": t.kind,
                "location": t.location,
                "pg_version": t.pg_version,
                "settings": t.settings,
                "device": t.device,
                "standbys": list(t.standbys),
                "client": t.client or None,
            }
            for t in run.targets
        ],
        "steps": [_step_entry(s) for s in run.steps],
    }


def _step_entry(step: StepRecord) -> dict[str, JSONValue]:
    return {
        "id": str(step.id),
        "target": step.target,
        "workload": step.workload,
        "asked": step.params,
        "resolved": step.resolved,
        "status": step.status,
        "error": step.error,
        "started_at": step.started_at,
        "finished_at": step.finished_at,
        "metrics": step.metrics,
        "warnings": step.warnings,
        "sections": step.sections,
        # JSON has no NaN: a missing value is null, as in the run document.
        "series": {
            name: [[p.t, p.value if math.isfinite(p.value) else None] for p in points]
            for name, points in step.series.items()
        },
        "histograms": {
            name: {str(k): v for k, v in sorted(counts.items())}
            for name, counts in step.histograms.items()
        },
        # Stored by a howfast before schema 4: its frozen figures give way when derived.
        "legacy": step.legacy,
    }


# -- reading a run file back ---------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Target(_Strict):
    name: str
    kind: str
    location: str | None
    pg_version: str | None
    settings: dict[str, str]
    device: dict[str, Any]
    # issue 28: absent from run files of earlier versions
    standbys: list[dict[str, Any]] = []
    client: dict[str, Any] | None = None


class _Step(_Strict):
    id: str
    target: str
    workload: str
    asked: dict[str, Any]
    resolved: dict[str, Any]
    status: Literal["completed", "failed", "skipped"]
    error: str | None
    started_at: str
    finished_at: str
    metrics: dict[str, Any]
    warnings: list[str]
    sections: dict[str, dict[str, Any]]
    series: dict[str, list[tuple[float, float | None]]]
    histograms: dict[str, dict[str, int]]
    legacy: bool


class _Run(_Strict):
    id: str
    plan: str
    label: str | None
    status: Literal["completed", "failed", "aborted"]
    started_at: str
    finished_at: str | None
    environment: dict[str, Any]
    targets: list[_Target]
    steps: list[_Step]


class _Source(_Strict):
    store: str


class _File(_Strict):
    format: Literal["howfast-runs"]
    version: Literal[1]
    exported_at: str
    howfast_version: str
    source: _Source
    runs: list[_Run]


@dataclass(frozen=True)
class Provenance:
    """Where an imported run comes from: recorded in its environment as `provenance`."""

    source_store: str
    source_run_id: str
    exported_at: str
    exported_by: str  # the howfast version that wrote the file
    file: str

    def document(self, imported_at: str) -> dict[str, JSONValue]:
        return {
            "source_store": self.source_store,
            "source_run_id": self.source_run_id,
            "exported_at": self.exported_at,
            "exported_by": f"howfast {self.exported_by}",
            "file": self.file,
            "imported_at": imported_at,
        }


@dataclass(frozen=True)
class ExportedRun:
    run: RunRecord  # as stored where it was exported from (its id is that store's)
    provenance: Provenance


def parse_run_file(text: str, name: str) -> list[ExportedRun]:
    """The runs of a run file; UsageError naming the file, the place in it and what was
    expected when it is not one, or the first value that cannot be stored (runcheck.py).
    Every text the runs hold comes back with its passwords masked (redact.py), as a
    measured run's would be."""
    if len(text) > runcheck.MAX_CHARS:
        raise UsageError(
            f"{name}: {len(text):,} characters, more than a run file may hold "
            f"({runcheck.MAX_CHARS:,})",
            "export fewer runs per file",
        )
    if runcheck.text_depth(text) > runcheck.MAX_DEPTH + 1:  # its root object is the first
        _values(runcheck.check_depth, _json(text, name), name)  # to name where
    raw = _json(text, name)
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise UsageError(
            f'{name}: not a howfast run file (no "format": "{FORMAT}")',
            "give a file written by `howfast export json`; tool output is imported with "
            "`howfast import pgbench` or `howfast import fio`",
        )
    if raw.get("version") != VERSION:
        raise UsageError(
            f"{name}: run file version {shown_value(raw.get('version'))}, this howfast reads "
            f"version {VERSION}",
            "import it with the howfast that wrote it, or a newer one",
        )
    try:  # from the text: JSON arrays are the series' [t, value] pairs
        parsed = _File.model_validate_json(text)
    except ValidationError as exc:
        raise UsageError(f"{name}: {_first_error(exc)}") from None
    if not parsed.runs:
        raise UsageError(f"{name}: the run file holds no run")
    for index, run in enumerate(parsed.runs):
        _check_names(run, f"{name}: runs[{index}]")
    _values(runcheck.check_runs, raw, name)  # the named figures first: their rules say more
    _values(runcheck.check_document, raw, name)
    found = []
    for index, run in enumerate(parsed.runs):
        record = _record(run)
        _check_names_apart(record, f"{name}: runs[{index}]")
        provenance = Provenance(
            redact_dsn(parsed.source.store),
            run.id,
            parsed.exported_at,
            redact_dsn(parsed.howfast_version),
            redact_dsn(name),
        )
        found.append(ExportedRun(record, provenance))
    return found


def _json(text: str, name: str) -> Any:
    """The document; NaN and infinities are read as floats, for runcheck to name where."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{name}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
            "give a file written by `howfast export json`",
        ) from None
    except RecursionError:
        raise UsageError(
            f"{name}: nested deeper than a run file can be (more than {runcheck.MAX_DEPTH} levels)",
            "give a file written by `howfast export json`",
        ) from None
    except ValueError:  # Python reads no integer of more than 4300 digits
        raise UsageError(
            f"{name}: a number of thousands of digits: not a figure, not a run file",
            "give a file written by `howfast export json`",
        ) from None


def _values(check: Callable[[Any], None], raw: Any, name: str) -> None:
    try:
        check(raw)
    except runcheck.FigureFault as fault:
        raise UsageError(
            f"{name}: {fault}: the run file is refused, nothing stored",
            "no measurement has such a value: what each figure may be is in docs/json.md#figures",
        ) from None


def _first_error(exc: ValidationError) -> str:
    """'runs[0].steps[2].status: Input should be ...' (and how many more faults there are)."""
    errors = exc.errors()
    first = errors[0]
    where = ""
    for part in first["loc"]:
        where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else str(part))
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where or 'the document'}: {first['msg']}{more}"


def _check_names(run: _Run, where: str) -> None:
    """Steps name their target; histogram values are integers (microseconds)."""
    names = [t.name for t in run.targets]
    if len(set(names)) != len(names):
        raise UsageError(f"{where}.targets: two targets have the same name")
    for i, step in enumerate(run.steps):
        if step.target not in names:
            raise UsageError(
                f"{where}.steps[{i}].target: {step.target!r} is not one of the run's targets "
                f"({', '.join(names) or 'none'})"
            )
        for hist, counts in step.histograms.items():
            for key in counts:
                if not (key.isascii() and key.lstrip("-").isdigit()):
                    raise UsageError(
                        f"{where}.steps[{i}].histograms.{hist}: {key!r} is not an integer value"
                    )


def _check_names_apart(run: RunRecord, where: str) -> None:
    """Two targets whose names differed only by a password are one once it is masked."""
    names = [t.name for t in run.targets]
    if len(set(names)) != len(names):
        raise UsageError(
            f"{where}.targets: two targets have the same name once their passwords are masked"
        )


def _masked(value: JSONValue) -> JSONValue:
    """Every text in `value` (keys too) with its passwords masked."""
    if isinstance(value, str):
        return redact_dsn(value)
    if isinstance(value, dict):
        return {redact_dsn(str(k)): _masked(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(v) for v in value]
    return value


def _text(value: str | None) -> str | None:
    return None if value is None else redact_dsn(value)


def _record(run: _Run) -> RunRecord:
    """The run as a record, its texts masked (ids, statuses and kinds are checked words)."""
    return RunRecord(
        id=int(run.id) if run.id.isascii() and run.id.isdigit() else 0,
        plan=redact_dsn(run.plan),
        status=run.status,
        started_at=run.started_at,
        finished_at=run.finished_at,
        environment=_masked(dict(run.environment)),
        targets=[
            TargetRecord(
                name=redact_dsn(t.name),
                kind=redact_dsn(t.kind),
                pg_version=_text(t.pg_version),
                settings=_masked(dict(t.settings)),
                device=_masked(dict(t.device)),
                location=_text(t.location),
                standbys=tuple(_masked(dict(s)) for s in t.standbys),
                client=_masked(dict(t.client or {})),
            )
            for t in run.targets
        ],
        steps=[
            StepRecord(
                target=redact_dsn(s.target),
                workload=s.workload,
                params=_masked(dict(s.asked)),
                status=s.status,
                started_at=s.started_at,
                finished_at=s.finished_at,
                metrics=_masked(dict(s.metrics)),
                warnings=[redact_dsn(w) for w in s.warnings],
                error=_text(s.error),
                series={
                    name: [Sample(t, math.nan if v is None else v) for t, v in points]
                    for name, points in s.series.items()
                },
                histograms={
                    name: {int(k): v for k, v in counts.items()}
                    for name, counts in s.histograms.items()
                },
                sections={k: _masked(dict(v)) for k, v in s.sections.items()},
                resolved=_masked(dict(s.resolved)),
                legacy=s.legacy,
            )
            for s in run.steps
        ],
        label=_text(run.label),
    )
