"""One step on a started target: prepare (unmeasured), sample around the tool, execute, and
commit the record to the store at once."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from howfast.analysis.derive import derive_last
from howfast.cancel import CancelToken
from howfast.clock import SYSTEM_CLOCK, Clock
from howfast.errors import HowfastError
from howfast.event_marks import EventMark, progress_line
from howfast.events.registry import actions
from howfast.events.schedule import EventSchedule
from howfast.events.step import schedule_for, step_events
from howfast.hosts.base import Host
from howfast.machine.pgbin import PgInstall
from howfast.model import StepRecord, StepSpec
from howfast.observer import RunObserver, StepRef
from howfast.plugin import registry
from howfast.plugin.registry import expected_seconds
from howfast.runner.signals import SignalGuard
from howfast.samplers.session import SampledPart, TargetSampling
from howfast.store.base import Store
from howfast.targets.base import Connection, Target
from howfast.targets.capabilities import ClientPlacement, HasClient, HasCurrentPrimary
from howfast.workloads import get_workload
from howfast.workloads.base import LoadedData, StepContext, StepOutcome, Workload


@dataclass
class StepEnvironment:
    """What every step of one target session shares."""

    run_id: int
    target: Target
    host: Host
    install: PgInstall
    store: Store
    observer: RunObserver
    guard: SignalGuard
    previous: list[StepRecord]  # this target's stored steps, oldest first
    first_target: list[StepRecord]  # the run's first target's (the same list on that one)
    # Where each stored step came in the run's progress ([N/total]), by its id: a skipped
    # step names the failed load it depended on by that number.
    numbers: dict[int, int] = field(default_factory=dict)
    clock: Clock = SYSTEM_CLOCK  # the steps' stored timestamps

    @property
    def cancel(self) -> CancelToken:
        return self.guard.cancel


def expected(spec: StepSpec) -> float | None:
    return expected_seconds(spec.workload, spec.params)


def client_placement(
    target: Target, workload: str, connection: Connection | None
) -> ClientPlacement | None:
    """Where a client-side workload (pgbench) runs and what it dials: the target's client
    placement (--client tcp: over 127.0.0.1; --client pod: a client pod of its own) when it
    has one; None for other workloads and targets (the target's host and connection)."""
    if connection is None or not registry.plugin(workload).client_side:
        return None
    if isinstance(target, HasClient):
        return target.client()
    return None


def client_connection(
    target: Target, workload: str, connection: Connection | None
) -> Connection | None:
    """The connection a client-side workload uses; howfast's own stays on `connection`."""
    placement = client_placement(target, workload, connection)
    return connection if placement is None else placement.connection


def execute_step(
    env: StepEnvironment,
    workload: Workload,
    spec: StepSpec,
    ref: StepRef,
    connection: Connection | None,
    step_dir: Path,
    sampling: TargetSampling,
    ready: Callable[[], None] | None = None,
) -> StepOutcome:
    """One step with its samplers around it; they stop whatever happens. `ready` is called
    just before the tool starts (a fleet's barrier: every instance starts together)."""
    ctx, schedule, primary = _step_context(env, spec, ref, connection, step_dir)
    try:  # before the samplers start, so that it is not measured (a cold restart...)
        prepared = workload.prepare(ctx, dict(spec.params))
    except HowfastError as exc:
        return StepOutcome(status="failed", error=str(exc))
    session = (
        sampling.start(spec.workload, schedule.disturbed, primary)
        if schedule is not None
        else sampling.start(spec.workload)
    )
    ctx.on_tool_started = session.track_process
    try:
        try:
            if ready is not None:
                ready()
            outcome = workload.execute(ctx, dict(spec.params))
        except HowfastError as exc:
            outcome = StepOutcome(status="failed", error=str(exc))
        except OSError as exc:  # the directory vanished, a full disk...: this step fails
            outcome = StepOutcome(status="failed", error=f"{workload.name} step: {exc}")
    finally:
        with env.guard.critical():  # a second Ctrl-C must not leave samplers running
            if schedule is not None:  # the load finished it; else (Ctrl-C) undo what is pending
                schedule.cancel()
            session.stop()
        shutil.rmtree(step_dir, ignore_errors=True)
    outcome = with_sampled(outcome, session.part()).merged(prepared)
    return _with_loaded_data(spec, outcome, env.previous)


def _step_context(
    env: StepEnvironment,
    spec: StepSpec,
    ref: StepRef,
    connection: Connection | None,
    step_dir: Path,
) -> tuple[StepContext, EventSchedule | None, Callable[[], Connection] | None]:
    """What the workload runs with (where its tools run, what they dial, howfast's own SQL),
    the step's events' schedule, and where the primary is now (None without a server)."""
    observer = env.observer

    def on_progress(t: float, values: dict[str, float]) -> None:
        observer.step_progress(ref, t, values)

    def on_event(mark: EventMark) -> None:
        observer.message(f"{ref.target}: {progress_line(mark)}")

    # Events: applied by their schedule while the load runs, which starts them (AT is time
    # into the load, not into preparation). Without a server there is nothing to apply them to.
    target = env.target
    schedule = None
    primary: Callable[[], Connection] | None = None
    placement = client_placement(env.target, spec.workload, connection)
    load_connection = connection if placement is None else placement.connection
    tools_host = env.host if placement is None else placement.host
    # howfast's own SQL from this process (sizes, pgbench_history counts): its connection,
    # which it reaches where the load's may not be (a client pod dials a pod-network name)
    sql = connection
    if connection is not None:
        given = connection
        primary = lambda: given  # noqa: E731
        if isinstance(target, HasCurrentPrimary):
            primary = target.connection_now  # a failover changes it
            if follows_failover(spec):
                # The load's connection lists the standbys too: it follows the promoted one,
                # and so must the rows counted after the load (a local connection).
                load_connection = target.client_connection_now(follow=True)
                sql = None
        schedule = schedule_for(
            target, spec.params, primary, step_dir / "events", env.cancel, on_event
        )
    ctx = StepContext(
        target=env.target,
        connection=load_connection,
        install=env.install,
        work_dir=step_dir,
        host=tools_host,
        server_host=env.host,
        sql=sql,
        cancel=env.cancel,
        on_progress=on_progress,
        previous=list(env.previous),
        first_target=list(env.first_target),
        events=schedule,
    )
    return ctx, schedule, primary


def follows_failover(spec: StepSpec) -> bool:
    """Whether the step has an event that makes another server the primary (a failover)."""
    known = actions()
    return any(
        e.action in known and known[e.action].replaces_primary for e in step_events(spec.params)
    )


def with_sampled(outcome: StepOutcome, part: SampledPart | None) -> StepOutcome:
    """The step's outcome joined with what the samplers saw; the tool's own figures win."""
    if part is None:
        return outcome
    return outcome.with_sampled(part.series, part.metrics, part.warnings, part.sections)


def store_step(
    env: StepEnvironment,
    spec: StepSpec,
    ref: StepRef,
    outcome: StepOutcome,
    started: str,
) -> StepRecord:
    """Commit the step at once (a crash loses only the step in flight) and tell the UI."""
    params = dict(spec.params)
    if spec.repetition > 1 or "repetition" in params:
        params["repetition"] = spec.repetition
    record = StepRecord(
        target=env.target.name,
        workload=spec.workload,
        params=params,
        resolved=dict(outcome.resolved_params),
        status=outcome.status,  # type: ignore[arg-type]
        started_at=started,
        finished_at=env.clock.now(),
        metrics=dict(outcome.metrics),
        warnings=list(outcome.warnings),
        error=outcome.error,
        series={name: list(points) for name, points in outcome.series.items()},
        histograms={name: dict(h) for name, h in outcome.histograms.items()},
        sections={name: dict(c) for name, c in outcome.sections.items()},
    )
    with env.guard.critical():
        record = replace(record, id=env.store.add_step(env.run_id, record))
    assert record.id is not None
    env.numbers[record.id] = ref.index + 1
    env.previous.append(record)
    env.observer.step_finished(ref, derive_last(env.previous))  # with its derived warnings
    return record


def unloaded_reason(
    spec: StepSpec, previous: Sequence[StepRecord], numbers: Mapping[int, int]
) -> str | None:
    """Why a step that reads loaded tables must not run: the target's latest load (a
    pgbench-init step) did not complete, so its tables are missing, half-loaded or without
    their primary keys, and a figure measured on them would be stored as if it meant
    something. None when the step reads no loaded data or the latest load completed."""
    if not registry.plugin(spec.workload).reads_loaded_data:
        return None
    load = next((s for s in reversed(previous) if registry.plugin(s.workload).loads_data), None)
    if load is None or load.status == "completed":
        return None
    which = get_workload(load.workload).label(load.params)
    number = numbers.get(load.id) if load.id is not None else None
    where = f"step {number} ({which})" if number else which
    return (
        f"{where} {load.status}, so the tables this step reads are missing or incomplete: "
        f"{error_gist(load.error)}"
    )


def error_gist(error: str | None) -> str:
    """The line of a step's error that says what went wrong (pgbench's "error:" line, the
    server's ERROR), else its first line; the server log's tail is left out."""
    lines = []
    for line in (error or "").splitlines():
        if line.startswith("--- server log"):
            break
        if line.strip():
            lines.append(line.strip())
    if not lines:
        return "no reason was recorded"
    telling = [line for line in lines[1:] if _TELLING.search(line)]
    gist = telling[0] if telling else lines[0]
    if len(gist) > GIST_CHARS:  # the step's own error has it in full
        gist = gist[: GIST_CHARS - 1].rsplit(" ", 1)[0] + "…"
    return gist


GIST_CHARS = 160


_TELLING = re.compile(r"error|no space|panic|fatal|killed|refused", re.IGNORECASE)


def _with_loaded_data(
    spec: StepSpec, outcome: StepOutcome, previous: list[StepRecord]
) -> StepOutcome:
    """A step on loaded tables records the scale (and dataset) the target's latest load
    really loaded; whether its reads fit that regime is derived when the run is read."""
    if not registry.plugin(spec.workload).reads_loaded_data:
        return outcome
    loaded = LoadedData.last_on(previous)
    return outcome if loaded is None else outcome.with_resolved(loaded.params())
