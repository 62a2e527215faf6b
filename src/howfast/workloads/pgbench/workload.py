"""Thin executors for pgbench: build the invocation, run it on the target's host, parse.
The logic lives in build/parse/txlog."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from howfast.errors import HowfastError, MissingToolError
from howfast.hosts.base import ToolResult
from howfast.machine.pgbin import INSTALL_HINT
from howfast.model import JSONValue, Sample
from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.capabilities import HasStorage
from howfast.workloads.base import (
    OutcomeDraft,
    PlanContext,
    PlannedInvocation,
    StepContext,
    StepOutcome,
    Workload,
)
from howfast.workloads.pgbench import (
    build,
    dataset,
    livelog,
    logsampling,
    plan,
    rtt,
    survive,
    survive_step,
)
from howfast.workloads.pgbench.init import plan as init_plan

# parse (pgbench's grammar: many patterns), txlog (numpy) and rates (the rate analysis) are
# imported where a step runs: a dry run, which only describes the steps, never loads them.
if TYPE_CHECKING:
    from howfast.workloads.pgbench import parse, txlog

TAIL_LINES = 8


def _pgbench(ctx: StepContext) -> str:
    path = ctx.host.program("pgbench")
    if path is None:
        raise MissingToolError(f"pgbench not found in {ctx.install.bindir}", INSTALL_HINT)
    return path


def _planned_pgbench(ctx: PlanContext) -> str:
    return ctx.host.program("pgbench") or "pgbench"


def _error_tail(result: ToolResult) -> str:
    """The last meaningful stderr lines (progress lines say nothing about a failure)."""
    lines = [
        line
        for line in (result.stderr + "\n" + result.stdout).splitlines()
        if line.strip() and not line.startswith("progress:")
    ]
    return f"pgbench exited with status {result.returncode}:\n" + "\n".join(lines[-TAIL_LINES:])


class PgbenchInitWorkload(Workload):
    name = "pgbench-init"

    def label(self, params: dict[str, JSONValue]) -> str:
        return init_plan.PLUGIN.label(params)

    def execute(self, ctx: StepContext, params: dict[str, JSONValue]) -> StepOutcome:
        from howfast.workloads.pgbench import parse

        sizing = None
        if dataset.wanted(params):  # measure one scale unit here, then load the chosen scale
            sizing = dataset.size_for(ctx, params, _pgbench(ctx))
            params = {**params, "scale": sizing.plan.scale}
        else:  # an explicit scale: refused before loading when it cannot fit
            dataset.check_scale_room(ctx, params, _pgbench(ctx))
        result = ctx.run(build.init_invocation(_pgbench(ctx), params, ctx.server()))
        init = parse.parse_init(result.stdout + "\n" + result.stderr)
        metrics: dict[str, JSONValue] = dict(init.metrics())
        metrics["scale"] = params.get("scale")
        if result.returncode != 0:
            failed = StepOutcome(status="failed", error=_error_tail(result), metrics=metrics)
            return dataset.finish(failed, sizing)
        metrics["db_size_bytes"] = pgquery.database_size(ctx.sql_connection())
        warnings: tuple[str, ...] = ()
        # The load leaves its tables in the page cache, dirty: the kernel would write them back
        # during the next, measured step (and on cgroup v1 charge that to no one, which reads
        # as another tenant's I/O). A checkpoint writes them now, after pgbench's own timings.
        try:
            metrics["checkpoint_after_load_s"] = round(pgquery.checkpoint(ctx.sql_connection()), 3)
        except HowfastError as exc:
            warnings = (f"{exc}: the load's data may still be written back during the next step",)
        return dataset.finish(StepOutcome(metrics=metrics, warnings=warnings), sizing)

    def planned(self, ctx: PlanContext, params: dict[str, JSONValue]) -> list[PlannedInvocation]:
        assert ctx.connection is not None
        program = _planned_pgbench(ctx)
        if not dataset.wanted(params):
            return [PlannedInvocation(build.init_invocation(program, params, ctx.connection))]
        sizing_run = build.init_invocation(program, {**params, "scale": 1}, ctx.connection)
        loading = build.init_invocation(program, {**params, "scale": "SCALE"}, ctx.connection)
        return [
            PlannedInvocation(sizing_run, "measures one scale unit"),
            PlannedInvocation(
                loading, f"SCALE: chosen from that measure for the dataset {params['dataset']}"
            ),
        ]


class PgbenchWorkload(Workload):
    name = "pgbench"

    def __init__(self) -> None:
        # Decided in prepare(), by step directory: a fleet runs one executor on many
        # instances at once.
        self._log_plans: dict[Path, logsampling.LogPlan] = {}

    def label(self, params: dict[str, JSONValue]) -> str:
        return plan.PLUGIN.label(params)

    def prepare(self, ctx: StepContext, params: dict[str, JSONValue]) -> StepOutcome:
        """Before the samplers start: the round-trip probe (rtt.py), then the log's sampling
        rate, from the offered rate or an earlier step of the same test, else from the probe
        for a select-only step of one client, else from a short calibration run (unmeasured)."""
        from howfast.workloads.pgbench import parse, rates

        probed = _probe_round_trip(ctx)
        try:
            offered = rates.resolve_rate(params, ctx.previous, ctx.first_target)
        except ValueError:
            offered = None  # execute() fails the step and says why
        if offered is not None:
            params = {**params, "rate": offered}
        log_plan = logsampling.plan_from_history(
            params, ctx.previous
        ) or logsampling.plan_from_round_trip(params, probed.metrics.get("client_rtt_p50_ms"))
        if log_plan is None:
            calibration = logsampling.calibration_params(params)
            invocation = build.calibration_invocation(
                _pgbench(ctx), calibration, jobs=_jobs(params, ctx.cores), conn=ctx.server()
            )
            result = ctx.run(invocation, subdir="calibration")
            tps = parse.parse_run(result.stdout + "\n" + result.stderr).tps
            log_plan = logsampling.plan_from_calibration(tps if result.returncode == 0 else None)
        self._log_plans[ctx.work_dir] = log_plan
        return probed

    def execute(self, ctx: StepContext, params: dict[str, JSONValue]) -> StepOutcome:
        from howfast.workloads.pgbench import rates

        try:
            offered = rates.resolve_rate(params, ctx.previous, ctx.first_target)
        except ValueError as exc:
            return StepOutcome(status="failed", error=str(exc))
        resolved: dict[str, JSONValue] = {}
        if offered is not None and params.get("rate") != offered:
            params = {**params, "rate": offered}
            resolved["rate"] = offered
        log_plan = self._log_plans.pop(ctx.work_dir, None) or logsampling.plan_from_history(
            params, ctx.previous
        )
        if log_plan is None:  # prepare() did not run: no calibration here, under the samplers
            log_plan = logsampling.LogPlan(None, basis="every transaction (no expected rate)")
        sampling = log_plan.sampling_rate
        if sampling is not None:
            params = {**params, "log_sampling_rate": sampling}
        resolved.update(log_plan.resolved())
        resolved["statement_latencies"] = build.statement_latencies(params)
        progress = logsampling.pgbench_progress(log_plan, ctx.host.follows_files)
        resolved["progress_source"] = "pgbench -P 1" if progress else "per-transaction log"
        jobs = _jobs(params, ctx.cores)
        if ctx.events is not None:  # events during the step: the load that survives them
            survived = survive_step.execute(
                ctx, params, ctx.events, program=_pgbench(ctx), jobs=jobs, progress=progress
            )
            return survived.with_resolved({**resolved, **survived.resolved_params})
        load = _Load(params, jobs=jobs, progress=progress, sampling=sampling)
        warnings = _log_placement_warnings(ctx)
        result = _run_load(ctx, load)
        outcome = OutcomeDraft(resolved_params={"jobs": jobs, **resolved}, warnings=warnings)
        return _judged(outcome, result, load)

    def planned(self, ctx: PlanContext, params: dict[str, JSONValue]) -> list[PlannedInvocation]:
        assert ctx.connection is not None
        notes = []
        if isinstance(params.get("rate_fraction"), int | float) and params.get("rate") is None:
            params = {**params, "rate": "RATE"}
            whose = "the run's first target's" if params.get("rate_basis") else "the curve's"
            notes.append(
                f"RATE: {float(params['rate_fraction']):.0%} of the TPS that {whose} "
                "full-speed step measures"
            )
        jobs = _jobs(params, ctx.cores)
        program = _planned_pgbench(ctx)
        probe = rtt.rtt_invocation(program, ctx.connection)
        planned = [
            PlannedInvocation(
                probe,
                f"the round-trip probe (unmeasured): {rtt.RTT_TRANSACTIONS} x SELECT 1 on the "
                "load's connection -> client_rtt_p50_ms, client_rtt_p99_ms",
            )
        ]
        rate = params.get("rate")
        if isinstance(rate, int | float) or not logsampling.wants_sampling(params):
            log_plan = logsampling.plan_from_history(params, [])
            if log_plan is not None and log_plan.sampling_rate is not None:
                params = {**params, "log_sampling_rate": log_plan.sampling_rate}
        else:
            params = {**params, "log_sampling_rate": "SAMPLING"}
            basis = "the offered rate"
            if rate is None:
                basis, calibration = _planned_calibration(program, params, jobs, ctx.connection)
                planned.append(calibration)
            notes.append(
                "SAMPLING: the fraction of transactions logged, so that the log keeps under "
                f"{logsampling.LOG_LINES_PER_S} lines/s at the rate expected from {basis}"
            )
        if ctx.host.follows_files:
            notes.append(
                f"-P 1 is left out when the expected rate is above "
                f"{logsampling.PROGRESS_MAX_TPS:,} TPS: the per-second series and the live view "
                "then come from the log"
            )
        if params.get("events"):  # the load that survives them: segments of the same command
            base = survive.base_argv(
                program, params, jobs=jobs, conn_args=ctx.connection.pgbench_args()
            )
            first = survive.segment_invocation(
                base, survive_step.segment_length(params), ctx.connection
            )
            events = ", ".join(survive_step.event_texts(params))
            notes.append(
                f"with events ({events}): pgbench runs in back-to-back segments of at most "
                f"{survive_step.segment_length(params)} s, each with -n and its own -T, until the "
                "step's duration is spent; pgbench's start-up cleanup runs once before "
                "(docs/events.md)"
            )
            return [*planned, PlannedInvocation(first, "; ".join(notes))]
        invocation = build.run_invocation(program, params, jobs=jobs, conn=ctx.connection)
        return [*planned, PlannedInvocation(invocation, "; ".join(notes))]


def _planned_calibration(
    program: str, params: dict[str, JSONValue], jobs: int, conn: Connection
) -> tuple[str, PlannedInvocation]:
    """Where a step with no offered rate takes its expected rate from, as --dry-run says it,
    and the calibration run, which runs only when nothing before it told that rate."""
    calibration = build.calibration_invocation(
        program, logsampling.calibration_params(params), jobs=jobs, conn=conn
    )
    if logsampling.probe_predicts(params):  # one select-only client: its probe tells the rate
        return (
            "an earlier step of the same test, else from the round-trip probe above "
            f"({logsampling.PROBE_TPS_SHARE} x 1000 / client_rtt_p50_ms), else from the "
            "calibration run above",
            PlannedInvocation(
                calibration,
                "a calibration run (unmeasured), only if no earlier step measured the rate "
                "and the round-trip probe failed",
            ),
        )
    return (
        "an earlier step of the same test, else from the calibration run above",
        PlannedInvocation(
            calibration, "a calibration run (unmeasured), unless an earlier step measured the rate"
        ),
    )


@dataclass(frozen=True)
class _Load:
    """A pgbench step's load as it runs: its parameters (the rate and log sampling rate
    resolved), its threads, whether pgbench prints progress lines, and the log's sampling
    rate (None: every transaction)."""

    params: dict[str, JSONValue]
    jobs: int
    progress: bool
    sampling: float | None


def _log_placement_warnings(ctx: StepContext) -> list[str]:
    scratch = ctx.target.scratch_dir() if isinstance(ctx.target, HasStorage) else None
    if scratch is not None and ctx.host.same_filesystem(ctx.work_dir, scratch):
        return [
            "pgbench's per-transaction log is written to the storage under test "
            "(no separate filesystem such as /dev/shm was available)"
        ]
    return []


def _run_load(ctx: StepContext, load: _Load) -> ToolResult:
    """pgbench, its progress lines (or its log, as pgbench writes it) fed to the live view."""
    from howfast.workloads.pgbench import parse

    invocation = build.run_invocation(
        _pgbench(ctx), load.params, jobs=load.jobs, conn=ctx.server(), progress=load.progress
    )

    def on_line(line: str) -> None:
        point = parse.parse_progress_line(line)
        if point is not None:
            values = {"tps": point.tps, "latency_ms": point.latency_ms}
            if point.failed is not None:  # this interval's failed transactions
                values["failed"] = float(point.failed)
            ctx.on_progress(point.t, values)

    # Without progress lines the live view comes from the log, as pgbench writes it.
    follower = (
        contextlib.nullcontext()
        if load.progress
        else livelog.LogFollower(
            ctx.work_dir / build.LOG_PREFIX.parent,
            f"{build.LOG_PREFIX.name}.*",
            load.sampling,
            ctx.on_progress,
            load.jobs,
        )
    )
    with follower:
        return ctx.run(invocation, on_line=on_line, track=True)


def _judged(outcome: OutcomeDraft, result: ToolResult, load: _Load) -> StepOutcome:
    """The step's figures from pgbench's output and its per-transaction logs; failed when
    pgbench failed or printed no tps."""
    from howfast.workloads.pgbench import parse, txlog

    run = parse.parse_run(result.stdout + "\n" + result.stderr)
    outcome.metrics.update(run.metrics())
    outcome.series.update(_progress_series(run))
    log_files = [result.files[name] for name in sorted(result.files)]
    sampling, progress = load.sampling, load.progress
    if log_files:
        # With a rate limit the 7th column is schedule lag; say so rather than guess.
        summary = txlog.read_logs(log_files, lag=load.params.get("rate") is not None)
        outcome.histograms["latency_us"] = summary.histogram
        if summary.histogram:
            outcome.metrics.update(txlog.latency_metrics(summary.histogram))
            outcome.metrics.update(txlog.latency_intervals(summary.histogram))
        if summary.failed and sampling is None:  # a sample's count is not the run's
            outcome.metrics.setdefault("failed", summary.failed)
        # Without progress lines the log's series are the step's (the first and last
        # seconds, partial, left out as -P leaves them); else beside them, as log_*.
        prefix = "log_" if progress else ""
        for name, points in _log_series(summary, sampling, whole_seconds=not progress).items():
            outcome.series.setdefault(f"{prefix}{name}", points)
    if result.returncode != 0 or run.aborted:
        outcome.status = "failed"
        outcome.error = _error_tail(result)
    elif "tps" not in outcome.metrics:
        outcome.status = "failed"
        outcome.error = "pgbench finished but printed no tps line:\n" + _error_tail(result)
    return outcome.freeze()


def _probe_round_trip(ctx: StepContext) -> StepOutcome:
    """The round trip from the client to the server, on the load's host and connection
    (workloads/pgbench/rtt.py): client_rtt_* metrics, or a warning when the probe failed
    (the step itself still runs: the load says more than the probe)."""
    result = ctx.run(rtt.rtt_invocation(_pgbench(ctx), ctx.server()), subdir="rtt-probe")
    log_files = [result.files[name] for name in sorted(result.files)]
    if result.returncode != 0 or not log_files:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:]
        why = f": {tail[0]}" if tail else ""
        return StepOutcome(
            warnings=(f"the round-trip probe failed (exit {result.returncode}){why}",)
        )
    try:
        metrics = rtt.rtt_metrics(log_files)
    except ValueError as exc:
        return StepOutcome(warnings=(f"the round-trip probe's log: {exc}",))
    return StepOutcome(metrics=dict(metrics))


def _jobs(params: dict[str, JSONValue], cores: int) -> int:
    requested = params.get("jobs")
    return build.resolve_jobs(int(params["clients"]), cores, int(requested) if requested else None)


def _log_series(
    summary: txlog.TxLogSummary, sampling: float | None, *, whole_seconds: bool = False
) -> dict[str, list[Sample]]:
    """The log's per-second series; from a sampled log, the counts (tps, failed, skipped)
    are scaled up by the sampling rate: estimates of the run's. `whole_seconds`: without
    the first and last seconds, which pgbench spent only part of, stamped as -P stamps its
    intervals (the end of each second since the start)."""
    scale = 1 / sampling if sampling else 1.0
    out = {}
    for name, points in summary.series.items():
        samples = [
            Sample(float(t), float(v) * scale if name in _COUNT_SERIES else float(v))
            for t, v in points
        ]
        if whole_seconds:
            last = max((p.t for p in samples), default=0.0)
            samples = [Sample(p.t, p.value) for p in samples if 0 < p.t < last]
        out[name] = samples
    return out


_COUNT_SERIES = frozenset({"tps", "failed", "skipped"})


def _progress_series(run: parse.PgbenchRun) -> dict[str, list[Sample]]:
    series: dict[str, list[Sample]] = {"tps": [], "latency_ms": [], "stddev_ms": []}
    lag: list[Sample] = []
    for p in run.progress:
        series["tps"].append(Sample(p.t, p.tps))
        series["latency_ms"].append(Sample(p.t, p.latency_ms))
        if p.stddev_ms is not None:
            series["stddev_ms"].append(Sample(p.t, p.stddev_ms))
        if p.lag_ms is not None:
            lag.append(Sample(p.t, p.lag_ms))
    if lag:
        series["lag_ms"] = lag
    return {k: v for k, v in series.items() if v}
