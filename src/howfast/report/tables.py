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
from howfast.analysis.metrics import with_unit
from howfast.analysis.overview import Overview, TargetView
from howfast.model import JSONValue, RunRecord
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


def cell_text(value: JSONValue) -> str:
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
                Cell(cell_text(r.label)),
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
        cpu = f"{cell_text(env.get('cpu_count'))} × {cell_text(env.get('cpu_model'))}"
        table.rows.append(
            [
                Cell(t.title),
                Cell(t.kind),
                Cell(cell_text(t.pg_version)),
                Cell(cell_text(t.storage)),
                Cell(cell_text(env.get("hostname"))),
                Cell(cell_text(env.get("kernel"))),
                Cell(cpu),
                Cell(_memory(env.get("memory_bytes")), numeric=True),
                Cell(_key_settings(t.settings)),
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
            + [Cell(cell_text(v)) for v in d.values]
            + [Cell(f"yes: {d.why}" if d.matters else "no")]
        )
    return table
