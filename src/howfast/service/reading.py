"""Reading runs for output: from the store, with the series their derivation needs, derived
(analysis/derive.py). Every command that shows a run reads it here."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from howfast.analysis.derive import derive_run, series_needed
from howfast.analysis.fleet import fleet_figures, fleet_verdicts, is_fleet
from howfast.analysis.trials import run_trials
from howfast.analysis.until import until_summary
from howfast.errors import UsageError
from howfast.model import JSONValue, RunRecord
from howfast.printable import printable
from howfast.store.base import Store


def stored_runs(db: Store, ids: list[int]) -> list[RunRecord]:
    """The runs as stored, without series; UsageError for an id the store does not have."""
    runs = []
    for rid in ids:
        run = db.get_run(rid)
        if run is None:
            raise UsageError(f"no run {rid} in the store", "see `howfast results list`")
        runs.append(run)
    return runs


def derived(db: Store, run: RunRecord, series: Collection[str] = ()) -> RunRecord:
    """A run read without series, with these series and the derivation's, derived."""
    from howfast.store.series import attach_series
    from howfast.store.sql import SqlStore  # SQLAlchemy: loaded once a store is read

    if isinstance(db, SqlStore):
        run = attach_series(db, run, {*series, *series_needed(run)})  # only these: stores are large
    else:
        with_all = db.get_run(run.id, with_series=True)
        run = with_all if with_all is not None else run
    return derive_run(run)


def read_run(
    db: Store,
    run_id: int,
    *,
    series: Collection[str] = (),
    all_series: bool = False,
    for_people: bool = False,
) -> RunRecord | None:
    """One run, derived; `all_series`: with every series and histogram (`--series`);
    `for_people`: its texts made safe to print (printable_run), for tables and reports."""
    run = db.get_run(run_id, with_series=all_series)
    if run is None:
        return None
    if for_people:
        run = printable_run(run)
    return derive_run(run) if all_series else derived(db, run, series)


def read_runs(
    db: Store, ids: list[int], *, series: Collection[str] = (), for_people: bool = False
) -> list[RunRecord]:
    """The runs, derived; UsageError for an id the store does not have."""
    runs = stored_runs(db, ids)
    if for_people:
        runs = [printable_run(run) for run in runs]
    return [derived(db, run, series) for run in runs]


def printable_run(run: RunRecord) -> RunRecord:
    """The run with what people and imports wrote in it (label, plan, target names and
    locations, the environment, warnings and errors) safe to print: control characters
    shown as escapes (printable.py), before it is derived, so that the verdicts that name
    a target name it so too. JSON documents keep the texts as stored."""

    def safe(text: str) -> str:
        return printable(text)

    targets = [
        replace(t, name=safe(t.name), location=safe(t.location) if t.location else t.location)
        for t in run.targets
    ]
    steps = [
        replace(
            s,
            target=safe(s.target),
            warnings=[safe(w) for w in s.warnings],
            error=printable(s.error, keep="\n\t") if s.error else s.error,
        )
        for s in run.steps
    ]
    environment = {k: safe(v) if isinstance(v, str) else v for k, v in run.environment.items()}
    return replace(
        run,
        plan=safe(run.plan),
        label=safe(run.label) if run.label else run.label,
        targets=targets,
        steps=steps,
        environment=environment,
    )


def run_document(run: RunRecord, *, with_series: bool = False) -> dict[str, JSONValue]:
    """The JSON document of a derived run, with what is derived of the run as a whole: a
    fleet's per-class figures and verdicts (docs/json.md#fleet), what an `--until` run's
    repetitions reached (docs/json.md#until)."""
    # The samplers' modules are loaded only here, for the sections they declare: reading a
    # run for the terminal or a report needs none of them.
    from howfast.samplers.registry import step_sections

    doc = run.document(with_series=with_series, sections=step_sections())
    until = until_summary(run)
    if until is not None:
        doc["until"] = until.document()
    trials = run_trials(run)
    if trials:  # tests whose event was repeated (docs/json.md#trials)
        doc["trials"] = [t.document() for t in trials]
    if is_fleet(run):
        figures = fleet_figures(run)
        doc["fleet"] = {
            "classes": [f.document() for f in figures],
            "verdicts": fleet_verdicts(figures),
        }
    return doc
