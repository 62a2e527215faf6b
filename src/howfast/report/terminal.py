"""Rich tables for the terminal: run lists, run details and the end-of-run summary."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from howfast.analysis.summary import TargetSummary, summarize
from howfast.model import RunRecord, RunSummary, StepRecord


def _fmt(value: float | None, digits: int = 2, thousands: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}" if thousands else f"{value:.{digits}f}"


def _init_line(step: StepRecord) -> str:
    m = step.metrics
    if step.status != "completed":
        return f"load (pgbench -i): {step.status}: {(step.error or '').splitlines()[0:1]}"
    scale = step.params.get("scale")
    phases = [
        f"{key.removesuffix('_s').replace('_', ' ')} {float(v):.2f}"
        for key, v in m.items()
        if key.endswith("_s") and key != "init_total_s" and isinstance(v, int | float)
    ]
    size = m.get("db_size_bytes")
    text = f"load (pgbench -i, scale {scale}): {_fmt(_num(m.get('init_total_s')))} s"
    if phases:
        text += " (" + ", ".join(phases) + ")"
    if isinstance(size, int):
        text += f", database {size / 1024**2:,.0f} MiB"
    return text


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def target_tables(summary: TargetSummary) -> RenderableType:
    parts: list[RenderableType] = []
    title = f"{summary.name}"
    facts = [
        f
        for f in (
            f"PostgreSQL {summary.pg_version}" if summary.pg_version else None,
            summary.storage,
        )
        if f
    ]
    if facts:
        title += " — " + ", ".join(facts)
    parts.append(Text(title, style="bold"))
    for step in summary.init:
        parts.append(Text(_init_line(step)))
    for mode, rows in summary.modes.items():
        show_rep = any(r.repetition for r in rows)
        table = Table(title=f"pgbench {mode}", title_justify="left")
        table.add_column("clients", justify="right")
        if show_rep:
            table.add_column("rep", justify="right")
        for name in ("TPS", "avg latency ms", "p99 latency ms", "conn time ms"):
            # Headers stay on one line: they are what people copy into their notes.
            table.add_column(name, justify="right")
        table.add_column("status")
        for r in rows:
            cells = [str(r.clients) if r.clients is not None else "–"]
            if show_rep:
                cells.append(str(r.repetition or 1))
            status = r.status + (f" ({r.warnings} warnings)" if r.warnings else "")
            cells += [
                _fmt(r.tps, 1, thousands=True),
                _fmt(r.latency_avg_ms, 3),
                _fmt(r.latency_p99_ms, 3),
                _fmt(r.conn_time_ms, 2),
                status,
            ]
            table.add_row(*cells)
        parts.append(table)
    return Group(*parts)


def run_summary(run: RunRecord) -> RenderableType:
    header = Text(
        f"run {run.id} ({run.plan}{', ' + run.label if run.label else ''}): {run.status}",
        style="bold",
    )
    return Group(header, *[target_tables(s) for s in summarize(run)])


def run_list(runs: list[RunSummary]) -> Table:
    table = Table(title="howfast runs")
    for name in ("id", "started", "plan", "label", "status", "steps", "targets"):
        table.add_column(name, justify="right" if name in ("id", "steps") else "left")
    for r in runs:
        table.add_row(
            str(r.id),
            r.started_at[:19].replace("T", " "),
            r.plan,
            r.label or "",
            r.status,
            str(r.step_count),
            ", ".join(r.targets),
        )
    return table


def run_details(run: RunRecord) -> RenderableType:
    env = run.environment
    lines = [
        f"started {run.started_at}, finished {run.finished_at or '–'}",
        f"host {env.get('hostname')}, kernel {env.get('kernel')}, {env.get('cpu_count')} CPUs "
        f"({env.get('cpu_model')}), memory {_gib(env.get('memory_bytes'))}",
    ]
    steps = Table(title="steps", title_justify="left")
    for name in ("id", "target", "workload", "params", "status", "warnings"):
        steps.add_column(name)
    for s in run.steps:
        params = ", ".join(
            f"{k}={v}" for k, v in s.params.items() if k not in ("extra_args", "scripts")
        )
        status = s.status if not s.error else f"{s.status}: {s.error.splitlines()[0]}"
        steps.add_row(str(s.id), s.target, s.workload, params, status, "\n".join(s.warnings))
    return Group(run_summary(run), *[Text(line) for line in lines], steps)


def _gib(value: object) -> str:
    return f"{float(value) / 1024**3:.1f} GiB" if isinstance(value, int | float) else "?"
