"""Turning tool output produced elsewhere into a stored one-step (or two-step) run."""

from __future__ import annotations

from howfast.errors import UsageError
from howfast.model import JSONValue, Sample, StepRecord, TargetRecord
from howfast.runner import now
from howfast.store.base import Store
from howfast.workloads.pgbench import parse


def pgbench_run_params(run: parse.PgbenchRun) -> dict[str, JSONValue]:
    """The params the output states, under the same names `howfast run` uses."""
    candidates: dict[str, JSONValue] = {
        "mode": run.mode,
        "script": run.script,
        "clients": run.clients,
        "jobs": run.threads,
        "duration_s": run.duration_s,
        "transactions": run.transactions_per_client,
        "scale": run.scale,
        "protocol": run.query_mode,
        "latency_limit_ms": run.latency_limit_ms,
    }
    return {k: v for k, v in candidates.items() if v is not None}


def import_pgbench_text(store: Store, text: str, *, source_name: str, label: str | None) -> int:
    init, run = parse.parse_any(text)
    if init is None and run is None:
        raise UsageError(
            f"{source_name}: no pgbench output found (expected the summary pgbench prints, "
            "e.g. 'tps = ...' or 'done in ... s')"
        )
    target = label or source_name
    started = now()
    run_id = store.create_run("import", {"imported_from": source_name}, started, label=label)
    version = (run.version if run else None) or (init.version if init else None)
    store.add_target(run_id, TargetRecord(name=target, kind="import", pg_version=version))
    status = "completed"
    if init is not None:
        init_metrics: dict[str, JSONValue] = dict(init.metrics())
        failed = bool(init.errors)
        store.add_step(
            run_id,
            StepRecord(
                target=target,
                workload="pgbench-init",
                params={"scale": init.scale} if init.scale else {},
                status="failed" if failed else "completed",
                started_at=started,
                finished_at=started,
                metrics=init_metrics,
                error="\n".join(init.errors) or None,
            ),
        )
        status = "failed" if failed else status
    if run is not None:
        failed = run.aborted or "tps" not in run.metrics()
        series = {
            "tps": [Sample(p.t, p.tps) for p in run.progress],
            "latency_ms": [Sample(p.t, p.latency_ms) for p in run.progress],
        }
        store.add_step(
            run_id,
            StepRecord(
                target=target,
                workload="pgbench",
                params=pgbench_run_params(run),
                status="failed" if failed else "completed",
                started_at=started,
                finished_at=started,
                metrics=dict(run.metrics()),
                error="\n".join(run.errors) or None,
                series={k: v for k, v in series.items() if v},
            ),
        )
        status = "failed" if failed else status
    store.finish_run(run_id, status, now())
    return run_id
