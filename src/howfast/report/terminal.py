"""Rich tables for the terminal: run lists, run details and the end-of-run summary. What
each workload shows of a target is its report part's (report/hooks.py)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from howfast.analysis.fleet import is_fleet
from howfast.analysis.probe import CommitCeiling
from howfast.analysis.summary import TargetSummary, summarize
from howfast.analysis.until import summary_lines, until_summary
from howfast.analysis.why import why_lines
from howfast.errortext import error_summary
from howfast.model import JSONValue, RunRecord
from howfast.report import (
    fleet_table,
    instance_io_view,
    io_tables,
    regimes_table,
    replication_view,
    sweep_table,
)
from howfast.report.durability_view import advice_parts, durability_parts
from howfast.report.footnotes import Footnotes
from howfast.report.hooks import Slot, report_for, reports_for


def fmt(value: float | None, digits: int = 2, thousands: bool = False) -> str:
    """A number in a table cell; '–' for none."""
    if value is None:
        return "–"
    return f"{value:,.{digits}f}" if thousands else f"{value:.{digits}f}"


def status_cell(status: str, error: str | None, refs: str) -> str:
    """A step's notes cell: its warnings' numbers, or its status and error's gist."""
    if status == "completed":
        return refs or "ok"
    return f"{status}: {error_summary(error)} {refs}".strip()


def _slot(summary: TargetSummary, slot: Slot) -> list[RenderableType]:
    """Every workload's parts at `slot`, then the warnings they numbered."""
    notes = Footnotes()
    parts = [
        part
        for report in reports_for(s.workload for s in summary.steps)
        for part in report.terminal(slot, summary, notes)
    ]
    return parts + notes.lines() if parts else []


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
    parts += _slot(summary, Slot.PROBE)
    parts += _slot(summary, Slot.LOAD)
    for step in summary.warmups:
        text = report_for(step.workload).warmup_text(step.all_params)
        parts.append(Text(f"warm-up (left out of every figure): {text}: {step.status}"))
    parts += _slot(summary, Slot.TESTS)
    if summary.ceiling:
        parts.append(ceiling_table(summary.ceiling))
    return Group(*parts)


def ceiling_table(c: CommitCeiling) -> RenderableType:
    """The storage's commit-rate ceiling beside what PostgreSQL reached with one connection."""
    table = Table(title="commit rate of one connection", title_justify="left")
    table.add_column("")
    table.add_column("commits/s", justify="right")
    table.add_column("ms per commit", justify="right")
    table.add_row(
        f"storage ceiling: wal-fsync write {c.write_ms:.3f} + fdatasync {c.sync_ms:.3f} ms",
        fmt(c.ceiling_tps, 0, thousands=True),
        fmt(c.flush_ms, 3),
    )
    if c.pg_test_fsync_ops_s is not None:
        table.add_row(
            "pg_test_fsync fdatasync",
            fmt(c.pg_test_fsync_ops_s, 0, thousands=True),
            fmt(1000 / c.pg_test_fsync_ops_s, 3) if c.pg_test_fsync_ops_s else "–",
        )
    if c.pgbench_tps is not None and c.share is not None:
        table.add_row(
            f"pgbench tpcb-like, 1 client: {c.share:.0%} of the ceiling",
            fmt(c.pgbench_tps, 1, thousands=True),
            fmt(c.pgbench_latency_ms, 3),
        )
    parts: list[RenderableType] = [table]
    if c.flushes_off:
        parts.append(Text(f"  {c.flushes_off}: PostgreSQL's commits did not wait for a flush"))
    elif c.above_ceiling:
        parts.append(
            Text(
                "  PostgreSQL committed faster than the storage flushes: its commits did not "
                "all wait for a flush (synchronous_commit, fsync) or the probe ran under "
                "other load"
            )
        )
    return Group(*parts)


def run_summary(run: RunRecord) -> RenderableType:
    header = Text(
        f"run {run.id} ({run.plan}{', ' + run.label if run.label else ''}): {run.status}",
        style="bold",
    )
    if is_fleet(run):  # a table per instance would bury the classes: `results show` has them
        return Group(header, *durability_parts(run), *fleet_table.fleet_parts(run))
    return Group(
        header,
        *durability_parts(run),  # can these commits survive a crash: first (docs/why.md)
        *why_parts(run),
        *advice_parts(run),
        *[target_tables(s) for s in summarize(run)],
        *sweep_table.sweep_parts(run),
        *[part for r in reports_for(s.workload for s in run.steps) for part in r.run_terminal(run)],
        *regimes_table.regimes_parts(run),
        *replication_view.design_parts(run),  # issue 28, E1's line
        *instance_io_view.instance_io_parts(run),  # issue 37: cnpg:// instances' WAL/data
        *until_parts(run),
    )


def until_parts(run: RunRecord) -> list[RenderableType]:
    """An `--until` run: which figures reached the width, which did not, and why each test
    stopped repeating (analysis/until.py)."""
    summary = until_summary(run)
    if summary is None:
        return []
    first, *rest = summary_lines(summary)
    return [Text(first, style="bold"), *(Text(line) for line in rest)]


VERDICT_STYLE = {"unclear": "dim", "load generator": "yellow", "memory/cache": "yellow"}


def why_parts(run: RunRecord) -> list[RenderableType]:
    """The verdict first: one sentence per pgbench test, what limited it (docs/why.md)."""
    lines = why_lines(run)
    if not lines:
        return []
    parts: list[RenderableType] = [Text("Why", style="bold")]
    for line in lines:
        text = Text("  ")
        text.append(f"[{line.verdict}] ", style=VERDICT_STYLE.get(line.verdict, "bold cyan"))
        text.append(line.sentence)
        parts.append(text)
    return parts


def run_details(run: RunRecord) -> RenderableType:
    lines = [f"started {run.started_at}, finished {run.finished_at or '–'}"]
    machine = _machine_line(run.environment)
    if machine:
        lines.append(machine)
    steps = Table(title="steps", title_justify="left")
    for name in ("id", "target", "workload", "params", "status", "warnings"):
        steps.add_column(name)
    for s in run.steps:
        params = ", ".join(
            f"{k}={v}" for k, v in s.all_params.items() if k not in ("extra_args", "scripts")
        )
        status = s.status if not s.error else f"{s.status}: {error_summary(s.error)}"
        steps.add_row(str(s.id), s.target, s.workload, params, status, "\n".join(s.warnings))
    return Group(run_summary(run), *[Text(line) for line in lines], steps, *io_tables.io_parts(run))


def _machine_line(env: dict[str, JSONValue]) -> str:
    """`host h, kernel k, 2 CPUs (model), memory 8.0 GiB`, with what is known only: an
    imported run knows none of it, and says nothing rather than "None"."""

    def known(key: str) -> JSONValue:
        value = env.get(key)
        return None if value in (None, "") else value

    parts = []
    if known("hostname") is not None:
        parts.append(f"host {known('hostname')}")
    if known("kernel") is not None:
        parts.append(f"kernel {known('kernel')}")
    cpus, model = known("cpu_count"), known("cpu_model")
    if cpus is not None or model is not None:
        count = f"{cpus} CPUs" if cpus is not None else "CPUs"
        parts.append(f"{count} ({model})" if model is not None else count)
    memory = known("memory_bytes")
    if isinstance(memory, int | float) and not isinstance(memory, bool):
        parts.append(f"memory {float(memory) / 1024**3:.1f} GiB")
    return ", ".join(parts)
