"""A finished run in Prometheus's text format, for node_exporter's textfile collector
(`howfast export prometheus RUN_ID -o FILE.prom`).

The same families and labels as the live exporter, set as they stood when the run ended.
No sample carries a time stamp: the textfile collector refuses files that do (it skips the
whole file, node_exporter PR #769), and Prometheus would drop samples older than its head
block anyway. When things happened is carried in values instead:
`howfast_run_start_time_seconds`, `howfast_run_end_time_seconds`,
`howfast_step_end_time_seconds`, `howfast_checkpoint_*_time_seconds`.
"""

from __future__ import annotations

from prometheus_client import generate_latest

from howfast.metrics.families import RunMetrics, epoch, step_labels
from howfast.model import RunRecord


def render_run(run: RunRecord) -> str:
    """The exposition text of one stored run (with its series, for the latency histogram)."""
    metrics = RunMetrics()
    run_id = str(run.id)
    started = epoch(run.started_at)
    metrics.run_started(run_id, run.plan, len(run.steps), started or 0.0)
    finished: dict[str, int] = {}
    for index, record in enumerate(run.steps):
        labels = step_labels(run_id, run.plan, record.target, record.workload, record.params, index)
        metrics.replay_progress(
            labels, record.series.get("tps", []), record.series.get("latency_ms", [])
        )
        metrics.step_finished(labels, record)
        metrics.run_steps_finished.labels(run_id, run.plan, record.status).inc()
        finished[record.status] = finished.get(record.status, 0) + 1
    if run.steps:
        metrics.run_progress.labels(run_id, run.plan).set(1.0)
    ended = epoch(run.finished_at) if run.finished_at else None
    if ended is not None:
        metrics.run_finished(run_id, run.plan, ended)
    return generate_latest(metrics.registry).decode()
