"""Reading only some series of a run: what comparisons and reports need.

`SqlStore.get_run(with_series=True)` reads every series and histogram of a run; a sampled
pgbench step has about forty series, and a report of fifty runs would spend most of its time
reading samples it never draws. This reads the named series alone.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection
from dataclasses import replace

from sqlalchemy import select

from howfast.model import RunRecord, Sample
from howfast.store.schema import samples, steps
from howfast.store.sql import SqlStore


def read_series(
    store: SqlStore, run_id: int, names: Collection[str]
) -> dict[int, dict[str, list[Sample]]]:
    """step id -> series name -> points ordered by time, for the series named."""
    by_step: dict[int, dict[str, list[Sample]]] = defaultdict(dict)
    if not names:
        return by_step
    query = (
        select(samples.c.step_id, samples.c.series, samples.c.t, samples.c.value)
        .join(steps, steps.c.id == samples.c.step_id)
        .where(steps.c.run_id == run_id, samples.c.series.in_(sorted(names)))
        .order_by(samples.c.step_id, samples.c.series, samples.c.t)
    )
    with store._engine.connect() as conn:
        rows = conn.execute(query).all()
    for step_id, name, t, value in rows:
        points = by_step[step_id].setdefault(name, [])
        points.append(Sample(t=t, value=math.nan if value is None else value))
    return by_step


def attach_series(store: SqlStore, run: RunRecord, names: Collection[str]) -> RunRecord:
    """The run (read without series) with those series on its steps, replacing what they
    had; the run given is left as it was."""
    found = read_series(store, run.id, names)
    steps = [
        step if step.id is None else replace(step, series=found.get(step.id, {}))
        for step in run.steps
    ]
    return replace(run, steps=steps)
