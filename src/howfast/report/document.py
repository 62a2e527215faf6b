"""The outline of a report: sections holding tables, charts and short paragraphs, in the order
a reader wants them. html.py and markdown.py render this outline; neither decides content.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from howfast.analysis.fleet import fleet_figures, fleet_verdicts, is_fleet
from howfast.analysis.overview import Overview
from howfast.analysis.steady import MIN_POINTS, STEADY_BAND
from howfast.report import rate_section, tables
from howfast.report.charts import MAX_PER_SECOND_TESTS, Chart, report_charts
from howfast.report.durability_view import report_sections
from howfast.report.fleet_table import fleet_charts, fleet_tables
from howfast.report.replication_view import design_table
from howfast.report.sweep_table import sweep_charts, sweep_table
from howfast.until_rule import MIN_REPETITIONS

Block = tables.Table | Chart | str


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Block] = field(default_factory=list)
    level: int = 2


@dataclass
class ReportDocument:
    title: str
    subtitle: str
    sections: list[Section]

    def charts(self) -> list[Chart]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, Chart)]


def _how_to_read(view: Overview) -> str:
    repeated = any(len(p.group.steps) > 1 for p in view.tests)
    text = (
        "Figures are the mean over a test's repetitions ± half the 95% confidence interval "
        "(Student's t), with n the number of repetitions that completed; a single "
        "repetition shows its value alone. "
        f"Steady TPS leaves out the first seconds of a step, until TPS comes within "
        f"{STEADY_BAND:.0%} of the median of the step's second half (steps of at least "
        f"{MIN_POINTS} s). Numbered notes beside a figure are warnings about it."
    )
    if not repeated:
        text += (
            f" These runs have no repetitions: run with --repeat {MIN_REPETITIONS} to see "
            "the spread of each figure."
        )
    return text


def _why_blocks(view: Overview) -> list[Block]:
    """One sentence per target and test: what limited it, with its evidence (docs/why.md)."""
    intro = (
        "What limited each pgbench test, from the wait events of its sessions, the CPU, the "
        "devices and the storage probe, by the rules of docs/why.md; 'unclear' when none holds."
    )
    return [intro, *[line.sentence for line in view.why]]


def build(view: Overview) -> ReportDocument:
    charts = report_charts(view)
    run_ids = ", ".join(str(r.id) for r in view.runs)
    sections = []
    titles: dict[int, dict[str, str]] = {}
    for target in view.targets:
        titles.setdefault(target.run_id, {})[target.name] = target.title
    durability, advice = report_sections(view.runs, titles)
    if durability:  # can these commits survive a crash: first (docs/why.md)
        sections.append(Section("durability", "Durability", [*durability]))
    if view.why:
        sections.append(Section("why", "Why", [*_why_blocks(view), *charts.why]))
    if advice:
        sections.append(Section("advice", "Advice", [*advice]))
    sections += [
        Section("runs", "Runs", [_how_to_read(view), tables.runs_table(view.runs)]),
        Section("environment", "Environment", [tables.environment_table(view.targets)]),
    ]
    for run in view.runs:
        designs = design_table(run)  # issue 28, E1's lines: the replication plan's table
        if designs is not None:
            sections.insert(1, Section(f"designs-{run.id}", "Designs side by side", [designs]))
        latency = sweep_table(run)
        if latency is not None:
            by_latency: list[Block] = [latency, *sweep_charts(run)]
            sections.insert(1, Section(f"latency-{run.id}", "By added storage latency", by_latency))
        if is_fleet(run):  # the classes side by side, before any instance's own figures
            verdicts = fleet_verdicts(fleet_figures(run))
            fleet: list[Block] = [*fleet_tables(run), *(f"Verdict: {v}" for v in verdicts)]
            fleet += fleet_charts(run)
            sections.insert(1, Section(f"fleet-{run.id}", f"Fleet, run {run.id}", fleet))
    if view.comparison is not None:
        blocks: list[Block] = [tables.comparison_table(view.comparison)]
        if view.comparison.environment:
            blocks.append(tables.environment_diff_table(view.comparison))
        blocks += [f"Warning: {w}" for w in view.comparison.warnings]
        sections.append(Section("comparison", "Comparison", blocks))
    for mode in view.pgbench_modes:
        sections.append(
            Section(
                f"pgbench-{mode}",
                f"pgbench {mode}",
                [tables.pgbench_table(mode, view.of("pgbench", mode)), *charts.by_mode[mode]],
            )
        )
    rate_blocks = rate_section.rate_blocks(view)
    if rate_blocks:
        sections.append(Section("latency-under-load", "Latency under load", rate_blocks))
    if view.warmups:
        lines = [
            f"{t.title}: pgbench {s.params.get('mode')}, {s.params.get('clients')} clients, "
            f"{s.params.get('duration_s')} s ({s.status})"
            for t, s in view.warmups
        ]
        sections.append(
            Section("warm-up", "Warm-up runs, left out of every figure", ["; ".join(lines)])
        )
    tests = len(view.of("pgbench"))
    if not charts.per_second_drawn:
        note = (
            f"Per-second charts are left out: this report covers {tests} pgbench tests, and "
            f"they are drawn for up to {MAX_PER_SECOND_TESTS}. A report of fewer runs has them."
        )
        sections.append(Section("per-second", "Per second", [note]))
    if charts.per_second:
        section = Section("per-second", "Per second")
        section.blocks.append(
            "TPS and latency of each repetition per second; disk I/O per second by device "
            "role (data, WAL) where the samplers ran. Shaded: checkpoints, and the seconds "
            "the steady state leaves out."
        )
        for _, drawn in charts.per_second:
            section.blocks += drawn
        sections.append(section)
    fio = view.of("fio")
    if fio or view.fsync or view.ceilings:
        probe: list[Block] = []
        if fio:
            probe += [tables.fio_table(fio), *charts.fio]
        if view.fsync:
            probe.append(tables.fsync_table(view))
        if view.ceilings:
            probe.append(tables.ceiling_table(view))
        sections.append(Section("probe", "Storage probe", probe))
    init = view.of("pgbench-init")
    if init:
        sections.append(
            Section("load", "Load (pgbench -i)", [tables.init_table(init), *charts.init])
        )
    return ReportDocument(
        title=f"howfast report: run{'s' if len(view.runs) > 1 else ''} {run_ids}",
        subtitle=", ".join(
            f"run {r.id}: {r.plan}{' (' + r.label + ')' if r.label else ''}, {r.status}"
            for r in view.runs
        ),
        sections=sections,
    )
