"""Thin executors for pgbench: build argv, run, parse. The logic lives in build/parse/txlog."""

from __future__ import annotations

from pathlib import Path

from howfast.errors import MissingToolError
from howfast.model import JSONValue, Sample
from howfast.targets import pgquery
from howfast.targets.fsinfo import same_filesystem
from howfast.targets.pgbin import INSTALL_HINT
from howfast.workloads.base import StepContext, StepOutcome, Workload
from howfast.workloads.pgbench import build, dataset, parse, rates, txlog
from howfast.workloads.process import ToolResult, run_tool

TAIL_LINES = 8


def _pgbench(ctx: StepContext) -> Path:
    path = ctx.install.program("pgbench")
    if path is None:
        raise MissingToolError(f"pgbench not found in {ctx.install.bindir}", INSTALL_HINT)
    return path


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
        if dataset.wanted(params):
            return f"pgbench -i, dataset {params['dataset']}"
        return f"pgbench -i scale {params.get('scale')}"

    def execute(self, ctx: StepContext, params: dict[str, JSONValue]) -> StepOutcome:
        sizing = None
        if dataset.wanted(params):  # measure one scale unit here, then load the chosen scale
            sizing = dataset.size_for(ctx, params, _pgbench(ctx))
            params = {**params, "scale": sizing.plan.scale}
        argv = build.init_argv(_pgbench(ctx), params, ctx.server().pgbench_args())
        result = run_tool(argv, env=ctx.server().client_env(), cwd=ctx.work_dir)
        init = parse.parse_init(result.stdout + "\n" + result.stderr)
        metrics: dict[str, JSONValue] = dict(init.metrics())
        metrics["scale"] = params.get("scale")
        if result.returncode != 0:
            failed = StepOutcome(status="failed", error=_error_tail(result), metrics=metrics)
            return dataset.finish(failed, sizing)
        metrics["db_size_bytes"] = pgquery.database_size(ctx.server())
        return dataset.finish(StepOutcome(metrics=metrics), sizing)


class PgbenchWorkload(Workload):
    name = "pgbench"

    def label(self, params: dict[str, JSONValue]) -> str:
        mode = params.get("mode")
        how = (
            f"{params['duration_s']:g} s"
            if params.get("duration_s") is not None
            else f"{params.get('transactions')} tx/client"
        )
        text = f"pgbench {mode}, {params.get('clients')} clients, {how}"
        if params.get("rate") is not None:
            text += f", rate {params['rate']}/s"
        elif isinstance(params.get("rate_fraction"), int | float):
            text += f", rate {float(params['rate_fraction']):.0%} of the maximum"
        elif params.get("curve_role") == "max":
            text += ", full speed (the curve's maximum)"
        settings = params.get("settings")
        if isinstance(settings, dict) and settings:
            text += ", " + ", ".join(f"{k}={v}" for k, v in settings.items())
        return text

    def execute(self, ctx: StepContext, params: dict[str, JSONValue]) -> StepOutcome:
        try:
            offered = rates.resolve_rate(params, ctx.previous)
        except ValueError as exc:
            return StepOutcome(status="failed", error=str(exc))
        resolved: dict[str, JSONValue] = {}
        if offered is not None and params.get("rate") != offered:
            params = {**params, "rate": offered}
            resolved["rate"] = offered
        clients = int(params["clients"])
        requested = params.get("jobs")
        jobs = build.resolve_jobs(clients, ctx.cores, int(requested) if requested else None)
        log_dir = ctx.work_dir / "txlog"
        log_dir.mkdir()
        warnings = []
        scratch = ctx.target.scratch_dir()
        if scratch is not None and same_filesystem(log_dir, scratch):
            warnings.append(
                "pgbench's per-transaction log is written to the storage under test "
                "(no separate filesystem such as /dev/shm was available)"
            )
        argv = build.run_argv(
            _pgbench(ctx),
            params,
            jobs=jobs,
            log_prefix=log_dir / "tx",
            conn_args=ctx.server().pgbench_args(),
        )

        def on_line(line: str) -> None:
            point = parse.parse_progress_line(line)
            if point is not None:
                values = {"tps": point.tps, "latency_ms": point.latency_ms}
                ctx.on_progress(point.t, values)

        duration = params.get("duration_s")
        timeout = float(duration) * 3 + 300 if isinstance(duration, int | float) else None
        result = run_tool(
            argv,
            env=ctx.server().client_env(),
            cwd=ctx.work_dir,
            on_stderr_line=on_line,
            timeout_s=timeout,
            on_start=ctx.on_tool_started,
        )
        run = parse.parse_run(result.stdout + "\n" + result.stderr)
        outcome = StepOutcome(resolved_params={"jobs": jobs, **resolved}, warnings=warnings)
        outcome.metrics.update(run.metrics())
        outcome.series.update(_progress_series(run))
        log_files = sorted(log_dir.iterdir())
        if log_files:
            # With a rate limit the 7th column is schedule lag; say so rather than guess.
            summary = txlog.read_logs(log_files, lag=params.get("rate") is not None)
            outcome.histograms["latency_us"] = summary.histogram
            if summary.histogram:
                outcome.metrics.update(txlog.latency_metrics(summary.histogram))
            if summary.failed:
                outcome.metrics.setdefault("failed", summary.failed)
            for name, points in summary.series.items():
                outcome.series.setdefault(
                    f"log_{name}", [Sample(float(t), float(v)) for t, v in points]
                )
        if result.returncode != 0 or run.aborted:
            outcome.status = "failed"
            outcome.error = _error_tail(result)
        elif "tps" not in outcome.metrics:
            outcome.status = "failed"
            outcome.error = "pgbench finished but printed no tps line:\n" + _error_tail(result)
        return outcome


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
