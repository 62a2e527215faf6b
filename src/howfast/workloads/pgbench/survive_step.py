"""A pgbench step with events: the load that survives them (survive.py), run on the step's
host, joined (stitch.py), its commits counted (history.py), and the events' marks stored
beside it (docs/events.md). Steps without events never come here.

The step's figures are the whole load's: `transactions` the commits pgbench acknowledged,
`tps` those over the load's wall time *including* the outages (delivered throughput), the
latency percentiles from every logged transaction. Stored raw, for the figures of each event
derived when the run is read (analysis/events.py): `sections["load"]` (segments, commit gaps,
commits per tenth of a second, pgbench_history counts per window) and `sections["events"]`
(the marks), and a latency histogram per event window (`latency_us:event1:before`...).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from howfast.errors import HowfastError
from howfast.event_marks import EventMark, EventTimeline, marks_section
from howfast.hosts.base import Invocation, ToolResult
from howfast.model import JSONValue, Sample
from howfast.workloads.base import OutcomeDraft, StepContext, StepOutcome
from howfast.workloads.pgbench import survive

# history (psycopg), parse and segments (pgbench's grammar), stitch and txlog (numpy) and
# the events' figures are imported where the load runs: a dry run, which only describes the
# step, never loads them.
if TYPE_CHECKING:
    from howfast.analysis.loadrecord import LoadRecord
    from howfast.workloads.pgbench import stitch

# How long the load waits, at its end, for an event still applying (a slow restart).
FINISH_TIMEOUT_S = 120.0


def segment_length(params: dict[str, JSONValue]) -> int:
    value = params.get("segment")
    return (
        int(value) if isinstance(value, int | float) and value >= 1 else survive.DEFAULT_SEGMENT_S
    )


def event_texts(params: dict[str, JSONValue]) -> list[str]:
    texts = params.get("events")
    return [str(t) for t in texts] if isinstance(texts, list) else []


def end_command(ctx: StepContext, program: str, mode: str) -> int | None:
    """Index of the builtin script's END (`pgbench --show-script`): a client cut in it is a
    commit in doubt. None when pgbench cannot say."""
    from howfast.workloads.pgbench.segments import final_command

    shown = ctx.run(Invocation((program, f"--show-script={mode}"), expected_s=1, timeout_s=30),
                    subdir="show-script")  # fmt: skip
    return final_command(shown.stderr) if shown.returncode == 0 else None


def execute(
    ctx: StepContext,
    params: dict[str, JSONValue],
    timeline: EventTimeline,
    *,
    program: str,
    jobs: int,
    progress: bool,
) -> StepOutcome:
    """Run the load for the step's duration while `timeline` applies the events; stop every
    pgbench it started before returning or raising."""
    from howfast.analysis import events as event_figures
    from howfast.workloads.pgbench import history, stitch
    from howfast.workloads.pgbench.segments import parse_segment

    conn = ctx.sql_connection()  # this process's SQL (history); the load dials ctx.server()
    outcome = OutcomeDraft(resolved_params={"jobs": jobs, "segment": segment_length(params)})
    try:
        for problem in history.reset(conn):  # pgbench's own start-up cleanup, skipped by -n
            outcome.warnings.append(f"before the load: {problem}")
        not_counted = history.not_counted(params)
        end = end_command(ctx, program, str(params.get("mode"))) if not_counted is None else None
        done = _supervise(ctx, params, timeline, program=program, jobs=jobs, progress=progress)
    except BaseException:
        timeline.cancel()
        raise
    marks = timeline.finish(FINISH_TIMEOUT_S)
    sampling = params.get("log_sampling_rate")
    rate = float(sampling) if isinstance(sampling, int | float) else None
    segments = [(parse_segment(s), s.log_files) for s in done.segments]
    record, series, logged = stitch.stitch(
        segments, origin_epoch=done.started_epoch, end_epoch=done.ended_epoch, sampling=rate,
        end_command=end, not_counted=not_counted,
    )  # fmt: skip
    if not_counted is None:
        windows = event_figures.commit_windows(marks, record)
        try:
            counts = history.count_rows(conn, windows, record.origin_epoch)
        except HowfastError as exc:
            outcome.warnings.append(f"pgbench_history could not be counted after the load: {exc}")
        else:
            record = dataclasses.replace(record, history=counts)
    for name, (lo, hi) in event_figures.windows(marks, record).items():
        outcome.histograms[f"latency_us:{name}"] = logged.histogram(lo, hi)
    whole = logged.histogram(0.0, record.end_s + 1.0)
    outcome.histograms["latency_us"] = whole
    outcome.series.update(
        {name: [Sample(t, v) for t, v in points] for name, points in series.items()}
    )
    outcome.sections["load"] = record.document()
    outcome.sections["events"] = {
        **marks_section(marks),
        "window_p99_ms": event_figures.window_p99_ms(outcome.histograms),
    }
    outcome.metrics.update(_metrics(record, whole, logged))
    _judge(outcome, done, marks)
    return outcome.freeze()


def _supervise(
    ctx: StepContext,
    params: dict[str, JSONValue],
    timeline: EventTimeline,
    *,
    program: str,
    jobs: int,
    progress: bool,
) -> survive.Supervised:
    from howfast.workloads.pgbench import parse

    conn = ctx.server()
    base = survive.base_argv(program, params, jobs=jobs, conn_args=conn.pgbench_args(),
                             progress=progress)  # fmt: skip
    origin: list[float] = []

    def started(epoch: float) -> None:
        origin.append(epoch)
        timeline.start(epoch)

    def run(invocation: Invocation, subdir: str, on_line: Callable[[str], None]) -> ToolResult:
        return ctx.run(invocation, subdir, on_line, track=True)

    def on_line(number: int, began: float, text: str) -> None:
        point = parse.parse_progress_line(text)
        if point is None or not origin:
            return
        values = {"tps": point.tps, "latency_ms": point.latency_ms}
        ctx.on_progress(point.t + began - origin[0], values)  # load time, not the segment's

    def stop_reason(segment: survive.SegmentRun) -> str | None:
        return survive.failure_without_event(segment, origin[0], timeline.marks())

    duration = params.get("duration_s")
    assert isinstance(duration, int | float)
    how = survive.Supervision(
        segment_s=segment_length(params),
        cancel=ctx.cancel,
        on_line=on_line,
        stop_reason=stop_reason,
        on_started=started,
    )
    return survive.supervise(base, conn, duration_s=float(duration), run=run, how=how)


def _metrics(
    record: LoadRecord, histogram: dict[int, int], logged: stitch.Timeline
) -> dict[str, JSONValue]:
    from howfast.workloads.pgbench import txlog

    metrics: dict[str, JSONValue] = {
        "transactions": record.acked,
        "load_segments": len(record.segments),
        "load_failed_connects": record.failed_connects,
        "load_aborted_clients": record.aborted_clients,
        "failed": sum(s.failed + len(s.aborts) for s in record.segments),
    }
    if record.end_s > 0:
        metrics["tps"] = round(record.acked / record.end_s, 3)
    if histogram:
        count = sum(histogram.values())
        # pgbench's own average is per segment: the load's is the logged transactions' mean
        metrics["latency_avg_ms"] = round(
            sum(v * n for v, n in histogram.items()) / count / 1000, 3
        )
        metrics.update(txlog.latency_metrics(histogram))
        metrics.update(txlog.latency_intervals(histogram))
    if logged.malformed_lines:
        metrics["log_malformed_lines"] = logged.malformed_lines
    return metrics


def _judge(outcome: OutcomeDraft, done: survive.Supervised, marks: tuple[EventMark, ...]) -> None:
    """A step fails when its load stopped on a failure no event explains, an action failed,
    an event was not applied (the step did not test what it was asked to: issue 35, a
    failover after a slow restart "not applied" in a completed step, exit 0), or no segment
    ran at all; the figures are stored either way."""
    failed = next((m for m in marks if m.error is not None), None)
    skipped = next((m for m in marks if m.skipped), None)
    if done.stopped is not None:
        outcome.status, outcome.error = "failed", done.stopped
    elif failed is not None:
        outcome.status, outcome.error = "failed", f"event {failed.text} failed: {failed.error}"
    elif skipped is not None:
        outcome.status = "failed"
        outcome.error = f"event {skipped.text} {skipped.problem or 'not applied'}"
    elif not any(s.ran for s in done.segments):
        last = done.segments[-1].stderr.strip() if done.segments else ""
        outcome.status = "failed"
        outcome.error = "no pgbench segment ran" + (f": {last.splitlines()[-1]}" if last else "")
    for mark in marks:
        if mark.verified is False:
            outcome.warnings.append(f"event {mark.text} was not verified: {mark.problem}")
        elif mark.skipped and not (outcome.error or "").startswith(f"event {mark.text} "):
            outcome.warnings.append(f"event {mark.text}: {mark.problem}")  # not said twice
