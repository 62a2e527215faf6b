"""Rich tables for the terminal: run lists, run details and the end-of-run summary."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from howfast.analysis.fleet import is_fleet
from howfast.analysis.groups import StepGroup
from howfast.analysis.metrics import with_unit
from howfast.analysis.probe import CommitCeiling, FioRow, FsyncResult, ProbeSummary
from howfast.analysis.summary import ModeRow, TargetSummary, summarize
from howfast.analysis.until import summary_lines, until_summary
from howfast.analysis.why import why_lines
from howfast.errortext import error_summary
from howfast.model import JSONValue, RunRecord, RunSummary, StepRecord
from howfast.printable import printable
from howfast.rates import rate_label
from howfast.report import (
    figures,
    fleet_table,
    io_tables,
    rate_table,
    regimes_table,
    replication_view,
    sweep_table,
)
from howfast.report.durability_view import advice_parts, durability_parts


def _fmt(value: float | None, digits: int = 2, thousands: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}" if thousands else f"{value:.{digits}f}"


def _init_line(step: StepRecord) -> str:
    m = step.metrics
    if step.status != "completed":
        return f"load (pgbench -i): {step.status}: {error_summary(step.error)}"
    scale = step.all_params.get("scale")
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
    if summary.probe:
        parts += probe_parts(summary.probe, summary.fio_groups if summary.fio_repeated else None)
    for step in summary.init:
        parts.append(Text(_init_line(step)))
    for step in summary.warmups:
        parts.append(Text(_warmup_line(step)))
    for mode, rows in summary.modes.items():
        if summary.repeated:
            parts += repeated_parts(mode, summary.groups.get(mode, []))
        else:
            parts.append(mode_table(mode, rows))
    if summary.probe and summary.probe.ceiling:
        parts.append(ceiling_table(summary.probe.ceiling))
    return Group(*parts)


def _warmup_line(step: StepRecord) -> str:
    p = step.all_params
    return (
        f"warm-up (left out of every figure): pgbench {p.get('mode')}, "
        f"{p.get('clients')} clients, {p.get('duration_s')} s: {step.status}"
    )


def mode_table(mode: str, rows: list[ModeRow]) -> Table:
    """One row per step, as pgbench printed it; steady TPS when the series were read."""
    show_rep = any(r.repetition for r in rows)
    show_steady = any(r.steady_tps is not None for r in rows)
    table = Table(title=f"pgbench {mode}", title_justify="left")
    table.add_column("clients", justify="right")
    if show_rep:
        table.add_column("rep", justify="right")
    for name in ("TPS", "avg latency ms", "p99 latency ms", "conn time ms"):
        # Headers stay on one line: they are what people copy into their notes.
        table.add_column(name, justify="right")
    if show_steady:
        table.add_column("steady TPS", justify="right")
        table.add_column("skipped", justify="right")
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
        ]
        if show_steady:
            skipped = f"{r.steady_skipped_s:g} s" if r.steady_skipped_s is not None else "–"
            cells += [_fmt(r.steady_tps, 1, thousands=True), skipped]
        table.add_row(*cells, status)
    return table


# (metric, column header); the units are in the table's title.
# (metric, column header); the units are in the table's title. Connection time stays in
# the per-step tables and the reports: a terminal has no room for it here.
REPEATED_COLUMNS = (
    ("tps", "TPS"),
    ("latency_avg_ms", "avg latency"),
    ("latency_p99_ms", "p99 latency"),
)
# Stability warnings are shown for the figures people quote, not for connection time.
WARNED_METRICS = ("tps", "steady_tps", "latency_avg_ms", "latency_p99_ms")


def repeated_parts(mode: str, groups: list[StepGroup]) -> list[RenderableType]:
    """One row per client count: mean ± 95% CI over the repetitions, the CV of TPS, steady
    TPS with the seconds it leaves out, and the stability warnings as footnotes."""
    notes = _Footnotes()
    show_steady = any(g.value("steady_tps") for g in groups)
    table = Table(
        title=f"pgbench {mode}: mean ± 95% CI over the repetitions; TPS in tx/s, times in ms",
        title_justify="left",
    )
    show_rate = any(rate_label(g.params) for g in groups)
    table.add_column("clients", justify="right", no_wrap=True)
    if show_rate:
        table.add_column("rate")
    table.add_column("n", justify="right", no_wrap=True)
    for _, header in REPEATED_COLUMNS:
        table.add_column(header, justify="right", no_wrap=True)
        if header == "TPS":
            table.add_column("CV", justify="right", no_wrap=True)
    if show_steady:
        table.add_column("steady TPS (skipped)", justify="right", no_wrap=True)
    table.add_column("notes")
    for g in groups:
        cells = [str(g.params.get("clients", "–"))]
        if show_rate:
            cells.append(rate_label(g.params) or "unlimited")
        cells.append(str(g.n))
        for name, header in REPEATED_COLUMNS:
            cells.append(figures.mean_ci(g.value(name), name))
            if header == "TPS":
                cells.append(figures.cv(g.value("tps")))
        if show_steady:
            skipped = figures.seconds_range([s.skipped_s for s in g.steady])
            cells.append(f"{figures.mean_ci(g.value('steady_tps'), 'steady_tps')} ({skipped})")
        cells.append(_group_notes(g, notes))
        table.add_row(*cells)
    return [table, *notes.lines()]


def _group_notes(group: StepGroup, notes: _Footnotes) -> str:
    warnings = [
        f"{with_unit(name)}: {text}"
        for name, texts in group.warnings.items()
        if name in WARNED_METRICS
        for text in texts
    ]
    if any(not s.settled for s in group.steady):
        warnings.append("TPS did not settle within 10% in the first half of a repetition")
    warnings += group.step_warnings
    text = notes.ranged_refs(tuple(warnings))
    if group.failed:
        text = f"{group.failed} failed " + text
    return text.strip() or "ok"


def fio_stats_table(groups: list[StepGroup], notes: _Footnotes) -> Table:
    """fio profiles over their repetitions: mean ± 95% CI."""
    columns = {
        "read_iops": "read IOPS",
        "write_iops": "write IOPS",
        "read_lat_avg_ms": "read lat",
        "write_lat_avg_ms": "write lat",
        "sync_lat_avg_ms": "sync lat",
    }
    names = tuple(columns)
    table = Table(
        title="storage probe (fio): mean ± 95% CI over the repetitions; average latency in ms",
        title_justify="left",
    )
    table.add_column("profile", no_wrap=True)
    table.add_column("n", justify="right", no_wrap=True)
    for header in columns.values():
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("notes")
    for g in groups:
        warnings = [
            f"{with_unit(n)}: {t}" for n, texts in g.warnings.items() if n in names for t in texts
        ]
        refs = notes.ranged_refs(tuple(warnings + g.step_warnings))
        table.add_row(
            str(g.params.get("profile", "?")),
            str(g.n),
            *[figures.mean_ci(g.value(name), name) for name in names],
            (f"{g.failed} failed " if g.failed else "") + (refs or "ok"),
        )
    return table


def _pair(avg: float | None, p99: float | None) -> str:
    """'0.138 / 1.79': average and p99 latency in ms in one cell."""
    if avg is None and p99 is None:
        return "–"
    return f"{_fmt(avg, 3)} / {_fmt(p99, 3)}"


class _Footnotes:
    """Warnings numbered once each: a cell shows [1], the text is printed under the table."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def refs(self, warnings: tuple[str, ...]) -> str:
        numbers = []
        for warning in warnings:
            if warning not in self.texts:
                self.texts.append(warning)
            numbers.append(self.texts.index(warning) + 1)
        return "".join(f"[{n}]" for n in numbers)

    def ranged_refs(self, warnings: tuple[str, ...]) -> str:
        """Like refs, with runs of numbers shortened ('[1-4] [7]') for a narrow column."""
        self.refs(warnings)
        return _ranges([self.texts.index(w) + 1 for w in warnings])

    def lines(self) -> list[RenderableType]:
        return [Text(f"  [{n}] {text}") for n, text in enumerate(self.texts, start=1)]


def _ranges(numbers: list[int]) -> str:
    """'[1]', '[1-4] [7]': note numbers, runs of them shortened to fit a narrow column."""
    runs: list[list[int]] = []
    for n in sorted(set(numbers)):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return " ".join(f"[{r[0]}]" if len(r) == 1 else f"[{r[0]}-{r[-1]}]" for r in runs)


def _status_cell(status: str, error: str | None, refs: str) -> str:
    if status == "completed":
        return refs or "ok"
    return f"{status}: {error_summary(error)} {refs}".strip()


def fio_table(rows: list[FioRow], notes: _Footnotes) -> Table:
    table = Table(title="storage probe (fio); latency in ms, avg / p99", title_justify="left")
    table.add_column("profile")
    for name in ("read IOPS", "write IOPS", "MB/s", "read lat", "write lat", "sync lat"):
        table.add_column(name, justify="right")
    table.add_column("notes")
    for r in rows:
        name = r.profile + (f" #{r.repetition}" if r.repetition and r.repetition > 1 else "")
        table.add_row(
            name,
            _fmt(r.read_iops, 0, thousands=True),
            _fmt(r.write_iops, 0, thousands=True),
            _fmt(r.mbps, 1, thousands=True),
            _pair(r.read_lat_avg_ms, r.read_lat_p99_ms),
            _pair(r.write_lat_avg_ms, r.write_lat_p99_ms),
            _pair(r.sync_lat_avg_ms, r.sync_lat_p99_ms),
            _status_cell(r.status, r.error, notes.refs(r.warnings)),
        )
    return table


def fsync_parts(result: FsyncResult, notes: _Footnotes) -> list[RenderableType]:
    refs = notes.refs(result.warnings)
    if result.status != "completed" or not result.methods:
        return [Text(f"pg_test_fsync: {_status_cell(result.status, result.error, refs)}")]
    title = "pg_test_fsync: one 8 kB write, then sync" + (f" {refs}" if refs else "")
    table = Table(title=title, title_justify="left")
    table.add_column("wal_sync_method")
    table.add_column("ops/s", justify="right")
    table.add_column("µs per op", justify="right")
    for m in result.methods:
        best = " (best)" if m.method == result.best else ""
        table.add_row(m.method + best, _fmt(m.ops_s, 0, thousands=True), _fmt(m.usecs, 0))
    return [table]


def probe_parts(
    probe: ProbeSummary, fio_groups: list[StepGroup] | None = None
) -> list[RenderableType]:
    """The probe's tables; with fio_groups (profiles that ran more than once), fio as
    statistics over the repetitions instead of one row per run."""
    notes = _Footnotes()
    parts: list[RenderableType] = []
    if fio_groups:
        parts.append(fio_stats_table(fio_groups, notes))
    elif probe.fio:
        parts.append(fio_table(probe.fio, notes))
    for result in probe.fsync:
        parts += fsync_parts(result, notes)
    return parts + notes.lines()


def ceiling_table(c: CommitCeiling) -> RenderableType:
    """The storage's commit-rate ceiling beside what PostgreSQL reached with one connection."""
    table = Table(title="commit rate of one connection", title_justify="left")
    table.add_column("")
    table.add_column("commits/s", justify="right")
    table.add_column("ms per commit", justify="right")
    table.add_row(
        f"storage ceiling: wal-fsync write {c.write_ms:.3f} + fdatasync {c.sync_ms:.3f} ms",
        _fmt(c.ceiling_tps, 0, thousands=True),
        _fmt(c.flush_ms, 3),
    )
    if c.pg_test_fsync_ops_s is not None:
        table.add_row(
            "pg_test_fsync fdatasync",
            _fmt(c.pg_test_fsync_ops_s, 0, thousands=True),
            _fmt(1000 / c.pg_test_fsync_ops_s, 3) if c.pg_test_fsync_ops_s else "–",
        )
    if c.pgbench_tps is not None and c.share is not None:
        table.add_row(
            f"pgbench tpcb-like, 1 client: {c.share:.0%} of the ceiling",
            _fmt(c.pgbench_tps, 1, thousands=True),
            _fmt(c.pgbench_latency_ms, 3),
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
        *rate_table.rate_parts(run),
        *regimes_table.regimes_parts(run),
        *replication_view.design_parts(run),  # issue 28, E1's line
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


def run_list(runs: list[RunSummary]) -> Table:
    table = Table(title="howfast runs")
    for name in ("id", "started", "plan", "label", "status", "steps", "targets"):
        table.add_column(name, justify="right" if name in ("id", "steps") else "left")
    for r in runs:
        table.add_row(
            str(r.id),
            r.started_at[:19].replace("T", " "),
            printable(r.plan),
            printable(r.label or ""),
            r.status,
            str(r.step_count),
            printable(", ".join(r.targets)),
        )
    return table


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
