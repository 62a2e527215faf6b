"""The tables of a report, as rows of text cells with numbered notes. HTML and Markdown render
the same tables from here, so the two formats never disagree on a number.

A warning sits next to the number it concerns: a stability warning on the metric's cell, what
a step warned about on the step's headline figure (TPS, IOPS, load time).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from howfast.analysis.compare import Comparison
from howfast.analysis.groups import StepGroup
from howfast.analysis.metrics import FIO_FIGURES, INIT_PHASES, with_unit
from howfast.analysis.overview import Overview, Placed, TargetView
from howfast.errortext import error_summary
from howfast.model import JSONValue, RunRecord
from howfast.rates import rate_label
from howfast.report import figures


@dataclass(frozen=True)
class Cell:
    text: str
    notes: tuple[int, ...] = ()  # footnote numbers of the table
    numeric: bool = False


@dataclass
class Table:
    id: str
    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # footnote n is notes[n - 1]

    def note(self, texts: Sequence[str]) -> tuple[int, ...]:
        """Numbers for these warnings, each text numbered once per table."""
        numbers = []
        for text in texts:
            if text not in self.notes:
                self.notes.append(text)
            numbers.append(self.notes.index(text) + 1)
        return tuple(dict.fromkeys(numbers))


def _text(value: JSONValue) -> str:
    return figures.DASH if value is None or value == "" else str(value)


def stat_cell(table: Table, group: StepGroup, name: str, extra: Sequence[str] = ()) -> Cell:
    """Mean ± CI of a metric, with its stability warnings (and `extra` ones) as notes."""
    warnings = [f"{with_unit(name)}: {w}" for w in group.warnings.get(name, [])]
    return Cell(
        figures.mean_ci(group.value(name), name), table.note([*warnings, *extra]), numeric=True
    )


def runs_table(runs: Sequence[RunRecord]) -> Table:
    table = Table(
        "runs", "Runs", ["run", "plan", "label", "status", "started", "finished", "steps"]
    )
    for r in runs:
        table.rows.append(
            [
                Cell(str(r.id), numeric=True),
                Cell(r.plan),
                Cell(_text(r.label)),
                Cell(r.status),
                Cell(r.started_at[:19].replace("T", " ")),
                Cell((r.finished_at or "")[:19].replace("T", " ") or figures.DASH),
                Cell(str(len(r.steps)), numeric=True),
            ]
        )
    return table


def _memory(value: JSONValue) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value / 1024**3:.1f} GiB"
    return figures.DASH


# Settings that change how PostgreSQL uses storage; the environment table shows these.
KEY_SETTINGS = (
    "shared_buffers",
    "effective_cache_size",
    "max_wal_size",
    "min_wal_size",
    "checkpoint_timeout",
    "checkpoint_completion_target",
    "wal_buffers",
    "wal_level",
    "wal_compression",
    "wal_sync_method",
    "synchronous_commit",
    "fsync",
    "full_page_writes",
    "data_checksums",
    "huge_pages",
    "effective_io_concurrency",
    "maintenance_io_concurrency",
    "bgwriter_delay",
    "bgwriter_lru_maxpages",
)


def _key_settings(settings: dict[str, str]) -> str:
    shown = [f"{k}={settings[k]}" for k in KEY_SETTINGS if k in settings]
    rest = len(settings) - len(shown)
    if rest:
        shown.append(f"(+{rest} more in `howfast results show --json`)")
    return ", ".join(shown) or figures.DASH


ENVIRONMENT_COLUMNS = [
    "target",
    "kind",
    "PostgreSQL",
    "storage",
    "host",
    "kernel",
    "CPU",
    "memory",
    "storage settings",
]


def environment_table(targets: Sequence[TargetView]) -> Table:
    table = Table(
        "environment",
        "Environment of each target",
        ENVIRONMENT_COLUMNS,
    )
    for t in targets:
        env = t.environment
        cpu = f"{_text(env.get('cpu_count'))} × {_text(env.get('cpu_model'))}"
        table.rows.append(
            [
                Cell(t.title),
                Cell(t.kind),
                Cell(_text(t.pg_version)),
                Cell(_text(t.storage)),
                Cell(_text(env.get("hostname"))),
                Cell(_text(env.get("kernel"))),
                Cell(cpu),
                Cell(_memory(env.get("memory_bytes")), numeric=True),
                Cell(_key_settings(t.settings)),
            ]
        )
    return table


PGBENCH_COLUMNS = (
    "tps",
    "steady_tps",
    "latency_avg_ms",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "conn_time_ms",
)


def pgbench_table(mode: str, placed: Sequence[Placed]) -> Table:
    """One row per target and client count: mean ± 95% CI of each figure over the
    repetitions (the value itself for one), the CV of TPS, and the seconds left out of the
    steady TPS."""
    show_rate = any(rate_label(p.group.params) for p in placed)
    columns = ["target", "clients"] + (["rate"] if show_rate else []) + ["n", with_unit("tps")]
    columns += ["TPS CV", with_unit("steady_tps"), "skipped at start"]
    columns += [with_unit(n) for n in PGBENCH_COLUMNS[2:]]
    table = Table(f"pgbench-{mode}", f"pgbench {mode}", columns)
    for p in placed:
        g = p.group
        not_settled = (
            ["TPS did not settle within 10% in the first half of a repetition"]
            if any(not s.settled for s in g.steady)
            else []
        )
        failed = [f"{g.failed} of {len(g.steps)} repetitions failed"] if g.failed else []
        row = [Cell(p.target.title), Cell(_text(g.params.get("clients")), numeric=True)]
        if show_rate:
            row.append(Cell(rate_label(g.params) or "unlimited"))
        row += [
            Cell(str(g.n), numeric=True),
            stat_cell(table, g, "tps", failed + g.step_warnings),
            Cell(figures.cv(g.value("tps")), numeric=True),
            stat_cell(table, g, "steady_tps", not_settled),
            Cell(figures.seconds_range([s.skipped_s for s in g.steady]), numeric=True),
        ]
        row += [stat_cell(table, g, name) for name in PGBENCH_COLUMNS[2:]]
        table.rows.append(row)
    return table


def init_table(placed: Sequence[Placed]) -> Table:
    columns = ["target", "scale", with_unit("init_total_s")]
    columns += [with_unit(n) for n in INIT_PHASES] + ["database size"]
    table = Table("pgbench-init", "pgbench -i: load time and its phases", columns)
    for p in placed:
        g = p.group
        failed = [f"{g.failed} load(s) failed"] if g.failed else []
        table.rows.append(
            [
                Cell(p.target.title),
                Cell(_text(g.params.get("scale")), numeric=True),
                stat_cell(table, g, "init_total_s", failed + g.step_warnings),
                *[stat_cell(table, g, name) for name in INIT_PHASES],
                stat_cell(table, g, "db_size_bytes"),
            ]
        )
    return table


def fio_table(placed: Sequence[Placed]) -> Table:
    columns = ["target", "profile", "n"] + [with_unit(n) for n in FIO_FIGURES]
    table = Table("fio", "Storage probe (fio)", columns)
    for p in placed:
        g = p.group
        failed = [f"{g.failed} of {len(g.steps)} runs failed"] if g.failed else []
        # The step's own warnings go with its headline figure: read IOPS, else write IOPS.
        headline = "read_iops" if g.value("read_iops") else "write_iops"
        cells = [
            stat_cell(table, g, name, failed + g.step_warnings if name == headline else [])
            for name in FIO_FIGURES
        ]
        table.rows.append(
            [
                Cell(p.target.title),
                Cell(_text(g.params.get("profile"))),
                Cell(str(g.n), numeric=True),
                *cells,
            ]
        )
    return table


def fsync_table(view: Overview) -> Table:
    table = Table(
        "pg-test-fsync",
        "pg_test_fsync: one 8 kB write, then sync",
        ["target", "wal_sync_method", "ops/s", "µs per op"],
    )
    for target, result in view.fsync:
        notes = table.note(list(result.warnings))
        if result.status != "completed" or not result.methods:
            error = error_summary(result.error)
            table.rows.append(
                [Cell(target.title), Cell(f"{result.status} {error}".strip(), notes)]
                + [Cell(figures.DASH)] * 2
            )
        for m in result.methods:
            best = " (best)" if m.method == result.best else ""
            table.rows.append(
                [
                    Cell(target.title),
                    Cell(m.method + best, notes),
                    Cell(f"{m.ops_s:,.0f}", numeric=True),
                    Cell(f"{m.usecs:,.0f}", numeric=True),
                ]
            )
    return table


def ceiling_table(view: Overview) -> Table:
    table = Table(
        "commit-ceiling",
        "Commit rate of one connection: the storage's ceiling and what PostgreSQL reached",
        [
            "target",
            "write + flush (ms)",
            "ceiling (commits/s)",
            "pgbench tpcb-like 1 client (tx/s)",
            "share of the ceiling",
        ],
    )
    for target, c in view.ceilings:
        notes: tuple[int, ...] = ()
        if c.flushes_off:
            notes = table.note([f"{c.flushes_off}: PostgreSQL's commits did not wait for a flush"])
        elif c.above_ceiling:
            notes = table.note(
                ["PostgreSQL committed faster than the storage flushes (a cache, or unsafe writes)"]
            )
        table.rows.append(
            [
                Cell(target.title),
                Cell(f"{c.flush_ms:.3f}", numeric=True),
                Cell(f"{c.ceiling_tps:,.0f}", numeric=True),
                Cell(figures.number(c.pgbench_tps, "tps"), numeric=True),
                Cell(f"{c.share:.0%}" if c.share is not None else figures.DASH, notes, True),
            ]
        )
    return table


def comparison_table(c: Comparison) -> Table:
    """Each matched test and metric: every run's mean ± CI (n), and each later run against
    the first: ratio, Welch's p-value and the verdict."""
    base = c.runs[0]
    columns = ["target", "test", "metric"] + [f"{r.title} mean ± CI (n)" for r in c.runs]
    for r in c.runs[1:]:
        columns += [f"run {r.id} / run {base.id}", "p", "verdict"]
    table = Table("comparison", f"Comparison with run {base.id}", columns)
    for test in c.tests:
        targets = " / ".join(dict.fromkeys(g.target for g in test.groups if g))
        for m in test.metrics:
            row = [
                Cell(targets),
                Cell(test.label, table.note(test.warnings)),
                Cell(with_unit(m.metric)),
            ]
            for value, group in zip(m.values, test.groups, strict=True):
                text = figures.mean_ci(value, m.metric)
                if value is not None:
                    text += f" ({value.n})"
                warned = group.warnings.get(m.metric, []) if group else []
                row.append(Cell(text, table.note(warned), True))
            for d in m.differences[1:]:
                if d is None:
                    row += [Cell(figures.DASH)] * 3
                    continue
                row += [
                    Cell(figures.ratio(d.ratio), numeric=True),
                    Cell(figures.p_value(d.p_value), numeric=True),
                    Cell(d.verdict),
                ]
            table.rows.append(row)
    return table


def environment_diff_table(c: Comparison) -> Table:
    table = Table(
        "environment-diff",
        "What differs between the runs' environments",
        ["where", "what"] + [r.title for r in c.runs] + ["matters"],
    )
    for d in c.environment:
        table.rows.append(
            [Cell(d.scope), Cell(d.field)]
            + [Cell(_text(v)) for v in d.values]
            + [Cell(f"yes: {d.why}" if d.matters else "no")]
        )
    return table
