"""The Store on SQLAlchemy Core: one implementation for SQLite and PostgreSQL.

Each write is its own transaction, committed before the method returns, so a crash loses
at most the step being written. Reads run in one transaction each (one snapshot on SQLite).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import repeat
from typing import Any, cast

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection, CursorResult, Row
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from howfast.errors import HowfastError
from howfast.model import (
    JSONValue,
    RunRecord,
    RunSummary,
    Sample,
    StepRecord,
    StepStatus,
    TargetRecord,
)
from howfast.redact import redact_dsn, redact_nested
from howfast.store.base import Columns, Store
from howfast.store.engine import make_engine, store_error, write_transaction
from howfast.store.location import StoreLocation
from howfast.store.migrations import MIGRATIONS, Migration, migrate
from howfast.store.schema import histograms, runs, samples, steps, targets

FINAL_RUN_STATUSES = ("completed", "failed", "aborted")
RESOLVED_VERSION = 4  # steps.resolved; before it, params held what was resolved too


class SqlStore(Store):
    """Results in a SQLite file or a PostgreSQL database; migrates the schema when opened."""

    def __init__(self, location: StoreLocation, migrations: Sequence[Migration] = MIGRATIONS):
        self._location = location
        self._engine = make_engine(location)
        try:
            with self._errors("open"):
                self.schema_version = migrate(
                    self._engine,
                    migrations,
                    where=location.display,
                    read_only=location.read_only,
                )
        except BaseException:
            self._engine.dispose()
            raise

    @property
    def read_only(self) -> bool:
        """Opened only to read: a SQLite file this user cannot write."""
        return self._location.read_only

    @property
    def location(self) -> str:
        """The file or the URL without its password."""
        return self._location.display

    # -- writes ------------------------------------------------------------------------------

    def create_run(
        self,
        plan: str,
        environment: dict[str, JSONValue],
        started_at: str,
        label: str | None = None,
        writer: dict[str, JSONValue] | None = None,
    ) -> int:
        with self._errors("write to"), write_transaction(self._engine) as conn:
            values: dict[str, Any] = {
                "plan": plan,
                "label": label,
                "status": "running",
                "started_at": started_at,
                "finished_at": None,
                "environment": environment,
            }
            if writer is not None:  # left NULL otherwise, as for runs stored before v3
                values["writer"] = writer
            result = conn.execute(insert(runs).values(**values))
            return _new_id(result)

    def add_target(self, run_id: int, target: TargetRecord) -> None:
        with self._errors("write to"), write_transaction(self._engine) as conn:
            self._require_run(conn, run_id)
            self._insert_target(conn, run_id, target)

    def update_target(self, run_id: int, target: TargetRecord) -> None:
        """Replace the target with the same name; add it when the run does not have it yet."""
        with self._errors("write to"), write_transaction(self._engine) as conn:
            self._require_run(conn, run_id)
            result = conn.execute(
                update(targets)
                .where(targets.c.run_id == run_id, targets.c.name == target.name)
                .values(_target_values(target))
            )
            if result.rowcount == 0:
                self._insert_target(conn, run_id, target)

    def add_step(
        self,
        run_id: int,
        step: StepRecord,
        *,
        more_series: Mapping[str, Columns] | None = None,
    ) -> int:
        with self._errors("write to"), write_transaction(self._engine) as conn:
            self._require_run(conn, run_id)
            values: dict[str, Any] = {
                "run_id": run_id,
                "position": _next_position(steps.c.position, steps.c.run_id, run_id),
                "target": step.target,
                "workload": step.workload,
                # what the user typed (an exec event's command line) may hold a password
                "params": redact_nested(step.params),
                "status": step.status,
                "error": redact_dsn(step.error) if step.error is not None else None,
                "started_at": step.started_at,
                "finished_at": step.finished_at,
                "metrics": step.metrics,
                "warnings": step.warnings,
            }
            # Never NULL, which marks older steps, except for such a step imported from a
            # run file (exports/restore.py): its frozen figures still give way when derived.
            if self.schema_version >= RESOLVED_VERSION and not step.legacy:
                values["resolved"] = step.resolved
            if step.sections:  # left NULL otherwise, as for steps stored before v2
                # an event's text in its marks is the user's, as typed (see params)
                values["sections"] = redact_nested(step.sections)
            result = conn.execute(insert(steps).values(**values))
            step_id = _new_id(result)
            for name, points in step.series.items():
                times = [p.t for p in points]
                _insert_samples(conn, step_id, name, times, [p.value for p in points])
            for name, columns in (more_series or {}).items():
                _insert_samples(conn, step_id, name, *columns)
            histogram_rows = [
                {"step_id": step_id, "name": name, "value": value, "count": count}
                for name, counts in step.histograms.items()
                for value, count in counts.items()
            ]
            if histogram_rows:
                conn.execute(insert(histograms), histogram_rows)
            return step_id

    def add_run_environment(self, run_id: int, facts: Mapping[str, JSONValue]) -> None:
        with self._errors("write to"), write_transaction(self._engine) as conn:
            found = conn.execute(select(runs.c.environment).where(runs.c.id == run_id)).first()
            if found is None:
                raise HowfastError(f"no run {run_id} in the results store {self.location}")
            environment = {**(found[0] or {}), **facts}
            conn.execute(update(runs).where(runs.c.id == run_id).values(environment=environment))

    def finish_run(self, run_id: int, status: str, finished_at: str) -> None:
        if status not in FINAL_RUN_STATUSES:
            raise ValueError(f"a run finishes as one of {FINAL_RUN_STATUSES}, not {status!r}")
        with self._errors("write to"), write_transaction(self._engine) as conn:
            result = conn.execute(
                update(runs)
                .where(runs.c.id == run_id)
                .values(status=status, finished_at=finished_at)
            )
            if result.rowcount == 0:
                raise HowfastError(f"no run {run_id} in the results store {self.location}")

    def abandon_run(self, run_id: int) -> bool:
        last_step_end = (
            select(func.max(steps.c.finished_at)).where(steps.c.run_id == run_id).scalar_subquery()
        )
        with self._errors("write to"), write_transaction(self._engine) as conn:
            result = conn.execute(
                update(runs)
                .where(runs.c.id == run_id, runs.c.status == "running")
                .values(
                    status="aborted", finished_at=func.coalesce(last_step_end, runs.c.started_at)
                )
            )
            return result.rowcount > 0

    def delete_run(self, run_id: int) -> bool:
        # Children explicitly rather than by cascade: works whatever the foreign key settings.
        run_steps = select(steps.c.id).where(steps.c.run_id == run_id)
        with self._errors("delete from"), write_transaction(self._engine) as conn:
            conn.execute(delete(samples).where(samples.c.step_id.in_(run_steps)))
            conn.execute(delete(histograms).where(histograms.c.step_id.in_(run_steps)))
            conn.execute(delete(steps).where(steps.c.run_id == run_id))
            conn.execute(delete(targets).where(targets.c.run_id == run_id))
            return conn.execute(delete(runs).where(runs.c.id == run_id)).rowcount > 0

    # -- reads -------------------------------------------------------------------------------

    def running_runs(self) -> list[tuple[int, JSONValue]]:
        with self._errors("read"), self._engine.connect() as conn:
            rows = conn.execute(
                select(runs.c.id, runs.c.writer).where(runs.c.status == "running")
            ).all()
        return [(row.id, row.writer) for row in rows]

    def list_runs(self) -> list[RunSummary]:
        """All runs, newest start time first (ties: last created first)."""
        with self._errors("read"), self._engine.connect() as conn:
            run_rows = conn.execute(
                select(
                    runs.c.id,
                    runs.c.plan,
                    runs.c.status,
                    runs.c.started_at,
                    runs.c.finished_at,
                    runs.c.label,
                ).order_by(runs.c.started_at.desc(), runs.c.id.desc())
            ).all()
            target_names: dict[int, list[str]] = defaultdict(list)
            for run_id, name in conn.execute(
                select(targets.c.run_id, targets.c.name).order_by(
                    targets.c.run_id, targets.c.position
                )
            ):
                target_names[run_id].append(name)
            step_counts: dict[int, int] = {
                run_id: count
                for run_id, count in conn.execute(
                    select(steps.c.run_id, func.count()).group_by(steps.c.run_id)
                )
            }
        return [
            RunSummary(
                id=row.id,
                plan=row.plan,
                status=row.status,
                started_at=row.started_at,
                finished_at=row.finished_at,
                label=row.label,
                targets=tuple(target_names.get(row.id, [])),
                step_count=step_counts.get(row.id, 0),
            )
            for row in run_rows
        ]

    def get_run(self, run_id: int, *, with_series: bool = False) -> RunRecord | None:
        with self._errors("read"), self._engine.connect() as conn:
            run = conn.execute(select(runs).where(runs.c.id == run_id)).one_or_none()
            if run is None:
                return None
            target_rows = conn.execute(
                select(targets).where(targets.c.run_id == run_id).order_by(targets.c.position)
            ).all()
            step_rows = conn.execute(
                select(steps).where(steps.c.run_id == run_id).order_by(steps.c.position)
            ).all()
            series: dict[int, dict[str, list[Sample]]] = defaultdict(dict)
            counts: dict[int, dict[str, dict[int, int]]] = defaultdict(dict)
            if with_series:
                series = _read_series(conn, run_id)
                counts = _read_histograms(conn, run_id)
        return RunRecord(
            id=run.id,
            plan=run.plan,
            status=run.status,
            started_at=run.started_at,
            finished_at=run.finished_at,
            environment=run.environment or {},
            targets=[_target_record(row) for row in target_rows],
            steps=[
                _step_record(row, series.get(row.id, {}), counts.get(row.id, {}))
                for row in step_rows
            ],
            label=run.label,
        )

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        self._engine.dispose()

    # -- helpers -----------------------------------------------------------------------------

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Turn driver errors into one line without the password (and without the chained
        driver exception, whose text we do not control)."""
        try:
            yield
        except SQLAlchemyError as exc:
            raise store_error(doing, exc, self._location) from None

    def _require_run(self, conn: Connection, run_id: int) -> None:
        if conn.scalar(select(runs.c.id).where(runs.c.id == run_id)) is None:
            raise HowfastError(f"no run {run_id} in the results store {self.location}")

    def _insert_target(self, conn: Connection, run_id: int, target: TargetRecord) -> None:
        try:
            with conn.begin_nested():  # a savepoint, so a duplicate does not poison the rest
                conn.execute(
                    insert(targets).values(
                        run_id=run_id,
                        position=_next_position(targets.c.position, targets.c.run_id, run_id),
                        **_target_values(target),
                    )
                )
        except IntegrityError:
            raise HowfastError(f"run {run_id} already has a target named {target.name!r}") from None


def _new_id(result: CursorResult[Any]) -> int:
    key = result.inserted_primary_key
    if key is None:  # not reachable for a single-row INSERT; keeps the type checker honest
        raise HowfastError("the results store returned no id for a new row")
    return int(key[0])


def _next_position(position: Any, owner: Any, run_id: int) -> Any:
    """The next free position under a run, computed in the INSERT itself."""
    return select(func.coalesce(func.max(position) + 1, 0)).where(owner == run_id).scalar_subquery()


def _target_values(target: TargetRecord) -> dict[str, Any]:
    return {
        "name": target.name,
        "kind": target.kind,
        # Callers redact; this is the belt to their braces.
        "location": redact_dsn(target.location) if target.location is not None else None,
        "pg_version": target.pg_version,
        "settings": target.settings,
        "device": target.device,
        "standbys": list(target.standbys) or None,
        "client": target.client or None,
    }


def _read_series(conn: Connection, run_id: int) -> dict[int, dict[str, list[Sample]]]:
    by_step: dict[int, dict[str, list[Sample]]] = defaultdict(dict)
    rows = conn.execute(
        select(samples.c.step_id, samples.c.series, samples.c.t, samples.c.value)
        .join(steps, steps.c.id == samples.c.step_id)
        .where(steps.c.run_id == run_id)
        .order_by(samples.c.step_id, samples.c.series, samples.c.t)
    )
    for step_id, name, t, value in rows:
        points = by_step[step_id].setdefault(name, [])
        points.append(Sample(t=t, value=math.nan if value is None else value))
    return by_step


def _read_histograms(conn: Connection, run_id: int) -> dict[int, dict[str, dict[int, int]]]:
    by_step: dict[int, dict[str, dict[int, int]]] = defaultdict(dict)
    rows = conn.execute(
        select(histograms.c.step_id, histograms.c.name, histograms.c.value, histograms.c.count)
        .join(steps, steps.c.id == histograms.c.step_id)
        .where(steps.c.run_id == run_id)
        .order_by(histograms.c.step_id, histograms.c.name, histograms.c.value)
    )
    for step_id, name, value, count in rows:
        by_step[step_id].setdefault(name, {})[int(value)] = int(count)
    return by_step


def _target_record(row: Row[Any]) -> TargetRecord:
    return TargetRecord(
        name=row.name,
        kind=row.kind,
        pg_version=row.pg_version,
        settings=row.settings or {},
        device=row.device or {},
        location=row.location,
        standbys=tuple(row.standbys or ()),
        client=row.client or {},
    )


def _step_record(
    row: Row[Any], series: dict[str, list[Sample]], counts: dict[str, dict[int, int]]
) -> StepRecord:
    return StepRecord(
        id=row.id,
        target=row.target,
        workload=row.workload,
        params=row.params or {},
        status=cast(StepStatus, row.status),
        started_at=row.started_at,
        finished_at=row.finished_at,
        metrics=row.metrics or {},
        warnings=row.warnings or [],
        error=row.error,
        series=series,
        histograms=counts,
        sections=row.sections or {},
        resolved=row.resolved or {},
        legacy=row.resolved is None,
    )


# Samples are written this many at a time, straight through the database driver: a million
# points through SQLAlchemy's per-row parameter handling take a minute, and held as one list
# of rows, gigabytes.
SAMPLE_BATCH = 20_000


def _insert_samples(
    conn: Connection, step_id: int, name: str, times: Sequence[float], values: Sequence[float]
) -> None:
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    statement = (
        f"INSERT INTO {samples.name} (step_id, series, t, value) "
        f"VALUES ({mark}, {mark}, {mark}, {mark})"
    )
    for start in range(0, len(times), SAMPLE_BATCH):
        batch: Sequence[float | None] = values[start : start + SAMPLE_BATCH]
        if any(map(math.isnan, batch)):  # type: ignore[arg-type]
            batch = [_nan_to_none(v) for v in batch]  # type: ignore[arg-type]
        rows = zip(repeat(step_id), repeat(name), times[start : start + SAMPLE_BATCH], batch)
        conn.exec_driver_sql(statement, list(rows))


def _nan_to_none(value: float) -> float | None:
    # SQLite cannot store NaN in a REAL column; NULL stands for it and reads back as NaN.
    return None if math.isnan(value) else value
