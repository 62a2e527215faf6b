"""The outline of a report: sections holding tables, charts and short paragraphs, in the order
a reader wants them. html.py and markdown.py render this outline; neither decides content.
Each workload's tables and charts are its report part's (report/hooks.py), placed in their
slots: the tests after the comparison, the storage probe and the loads at the end.
"""

from __future__ import annotations

from howfast.analysis.fleet import fleet_figures, fleet_verdicts, is_fleet
from howfast.analysis.overview import Overview, Placed
from howfast.analysis.steady import MIN_POINTS, STEADY_BAND
from howfast.plugin.registry import find
from howfast.report import charts, tables, trials_view
from howfast.report.charts import Chart, ChartIds, io_per_second, per_second, wait_profiles
from howfast.report.durability_view import report_sections
from howfast.report.fleet_table import fleet_charts, fleet_tables
from howfast.report.hooks import Slot, WorkloadReport, report_for, reports_for
from howfast.report.instance_io_view import instance_io_table
from howfast.report.outline import Block, ReportDocument, Section
from howfast.report.replication_view import design_table
from howfast.report.sweep_table import sweep_charts, sweep_table
from howfast.until_rule import MIN_REPETITIONS


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


def _steady_tests(view: Overview) -> list[Placed]:
    """The tests whose per-second TPS has a steady state (pgbench's): the per-second charts'."""
    steady = {
        w for w in {p.group.workload for p in view.tests} if (f := find(w)) and f.steady_series
    }
    return [p for p in view.tests if p.group.workload in steady]


def build(view: Overview) -> ReportDocument:
    ids = ChartIds()  # numbered in the order they are made: the order they are read
    why_charts = wait_profiles(view, ids)
    reports: list[WorkloadReport] = reports_for(
        [*(p.group.workload for p in view.tests), *(s.workload for _, s in view.steps)]
    )
    run_ids = ", ".join(str(r.id) for r in view.runs)
    sections = []
    titles: dict[int, dict[str, str]] = {}
    for target in view.targets:
        titles.setdefault(target.run_id, {})[target.name] = target.title
    durability, advice = report_sections(view.runs, titles)
    if durability:  # can these commits survive a crash: first (docs/why.md)
        sections.append(Section("durability", "Durability", [*durability]))
    if view.why:
        sections.append(Section("why", "Why", [*_why_blocks(view), *why_charts]))
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
        instance_io = instance_io_table(run)  # issue 37: every cnpg:// instance's WAL/data
        if instance_io is not None:
            sections.insert(1, Section(f"instance-io-{run.id}", "Instances' WAL and data I/O",
                                       [instance_io]))  # fmt: skip
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
        blocks += trials_view.compare_lines(view.comparison.trials)  # loss probabilities
        blocks += [f"Warning: {w}" for w in view.comparison.warnings]
        sections.append(Section("comparison", "Comparison", blocks))
    for report in reports:
        sections += report.sections(Slot.TESTS, view, ids)
    if view.warmups:
        lines = [
            f"{t.title}: {report_for(s.workload).warmup_text(s.params)} ({s.status})"
            for t, s in view.warmups
        ]
        sections.append(
            Section("warm-up", "Warm-up runs, left out of every figure", ["; ".join(lines)])
        )
    sections += _per_second(_steady_tests(view), ids)
    probe = [block for report in reports for block in report.probe_blocks(view, ids)]
    if view.ceilings:
        probe.append(tables.ceiling_table(view))
    if probe:
        sections.append(Section("probe", "Storage probe", probe))
    for report in reports:
        sections += report.sections(Slot.LOAD, view, ids)
    return ReportDocument(
        title=f"howfast report: run{'s' if len(view.runs) > 1 else ''} {run_ids}",
        subtitle=", ".join(
            f"run {r.id}: {r.plan}{' (' + r.label + ')' if r.label else ''}, {r.status}"
            for r in view.runs
        ),
        sections=sections,
    )


def _per_second(tests: list[Placed], ids: ChartIds) -> list[Section]:
    """TPS, latency and disk I/O per second of each test, up to MAX_PER_SECOND_TESTS tests."""
    if len(tests) > charts.MAX_PER_SECOND_TESTS:
        note = (
            f"Per-second charts are left out: this report covers {len(tests)} pgbench tests, "
            f"and they are drawn for up to {charts.MAX_PER_SECOND_TESTS}. A report of fewer "
            "runs has them."
        )
        return [Section("per-second", "Per second", [note])]
    drawn: list[Chart] = []
    for p in tests:
        drawn += [c for c in (per_second(p, ids), io_per_second(p, ids)) if c is not None]
    if not drawn:
        return []
    section = Section("per-second", "Per second")
    section.blocks.append(
        "TPS and latency of each repetition per second; disk I/O per second by device "
        "role (data, WAL) where the samplers ran. Shaded: checkpoints, and the seconds "
        "the steady state leaves out."
    )
    section.blocks += drawn
    return [section]
