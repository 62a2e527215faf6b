"""`howfast compare` in the terminal: the headline figures of each matched test side by side,
warnings as numbered notes beside the figure they concern, then what differs in the
environments. `--json` has every metric."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from howfast.analysis.compare import CANNOT_JUDGE, Comparison, Difference, MatchedTest
from howfast.analysis.groups import StepGroup
from howfast.analysis.metrics import HEADLINE_METRICS, with_unit
from howfast.analysis.stats import Stats
from howfast.report import figures, replication_view, trials_view

VERDICT_STYLES = {"better": "green", "worse": "red"}


class _Notes:
    def __init__(self) -> None:
        self.texts: list[str] = []

    def refs(self, texts: list[str]) -> str:
        numbers = []
        for text in texts:
            if text not in self.texts:
                self.texts.append(text)
            numbers.append(self.texts.index(text) + 1)
        return "".join(f"[{n}]" for n in dict.fromkeys(numbers))

    def lines(self) -> list[RenderableType]:
        return [Text(f"  [{n}] {t}", style="yellow") for n, t in enumerate(self.texts, 1)]


def _verdict(d: Difference) -> str | Text:
    if d.verdict.startswith(CANNOT_JUDGE):
        return "no spread" if "spread" in d.verdict else "too few runs"
    if d.significant is False:
        return f"none within {d.within * 100:g}%" if d.within is not None else "not significant"
    style = VERDICT_STYLES.get(d.verdict)
    return Text(d.verdict, style) if style else d.verdict


def _title(test: MatchedTest, several_targets: bool) -> Text:
    """The test, and which target position when the runs have several."""
    title = Text(test.label, "bold")
    if several_targets:
        title.append(f" (target {test.target_index + 1})", "dim")
    return title


def _value(value: Stats | None, group: StepGroup | None, name: str, notes: _Notes) -> str:
    text = figures.mean_ci(value, name)
    if value is not None:
        text += f" ({value.n})"
    return text + notes.refs(group.warnings.get(name, []) if group else [])


def comparison_table(c: Comparison, other: int, notes: _Notes) -> Table:
    """Run number `other` (an index into c.runs) against the baseline, test by test."""
    base, run = c.runs[0], c.runs[other]
    table = Table(
        title=f"{run.title} compared with {base.title}: mean ± 95% CI (repetitions); ratio; "
        f"Welch's p (significant below {c.alpha}); 'too few runs': significance cannot be "
        "judged from one repetition",
        title_justify="left",
    )
    table.add_column("test and metric", min_width=20)
    table.add_column(base.name, justify="right", no_wrap=True)
    table.add_column(run.name, justify="right", no_wrap=True)
    table.add_column("ratio", justify="right", no_wrap=True)
    table.add_column("95% CI", justify="right", no_wrap=True)
    table.add_column("p", justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    several_targets = any(t.target_index for t in c.tests)
    tests = [t for t in c.tests if t.groups[other] is not None]
    for index, test in enumerate(tests):
        if index:
            table.add_section()
        table.add_row(_title(test, several_targets))
        shown = [m for m in test.metrics if m.metric in HEADLINE_METRICS.get(test.workload, ())]
        for m in shown:
            d = m.differences[other]
            table.add_row(
                f"  {with_unit(m.metric)}",
                _value(m.values[0], test.groups[0], m.metric, notes),
                _value(m.values[other], test.groups[other], m.metric, notes),
                *(
                    [figures.DASH] * 4
                    if d is None
                    else [
                        figures.ratio(d.ratio),
                        _interval(d),
                        figures.p_value(d.p_value),
                        _verdict(d),
                    ]
                ),
            )
    return table


def _interval(d: Difference) -> str:
    if d.ratio_ci is None:
        return figures.DASH
    return f"{d.ratio_ci[0]:.3f}–{d.ratio_ci[1]:.3f}"


def statement_lines(c: Comparison, other: int) -> list[RenderableType]:
    """One sentence per test for its first headline figure: 'run 14 is 1.32x run 12 (95% CI
    1.27-1.37), significant', 'no difference found within 2%'."""
    lines: list[RenderableType] = []
    for test in c.tests:
        shown = [m for m in test.metrics if m.metric in HEADLINE_METRICS.get(test.workload, ())]
        d = shown[0].differences[other] if shown else None
        if d is None or not d.statement:
            continue
        style = VERDICT_STYLES.get(d.verdict, "") if d.significant else ""
        where = f" (target {test.target_index + 1})" if any(t.target_index for t in c.tests) else ""
        lines.append(
            Text(f"  {test.label}{where}, {with_unit(shown[0].metric)}: {d.statement}", style)
        )
    return lines


def environment_table(c: Comparison) -> Table:
    table = Table(title="what differs in the environments", title_justify="left")
    table.add_column("where")
    table.add_column("what")
    for r in c.runs:
        table.add_column(r.name)
    table.add_column("matters")
    for d in c.environment:
        matters = Text.assemble(("yes", "yellow"), f": {d.why}") if d.matters else "no"
        table.add_row(d.scope, d.field, *[v or figures.DASH for v in d.values], matters)
    return table


def why_lines(c: Comparison) -> list[RenderableType]:
    """What limited each test in each run, first: a change of verdict explains a change."""
    lines: list[RenderableType] = []
    for test in c.tests:
        verdicts = test.verdicts()
        if not any(verdicts):
            continue
        runs = "; ".join(
            f"{r.name}: {v or figures.DASH}" for r, v in zip(c.runs, verdicts, strict=False)
        )
        changed = len({v for v in verdicts if v}) > 1
        style = "yellow" if changed else ""
        where = f" (target {test.target_index + 1})"
        lines.append(Text(f"  {test.label}{where}: {runs}", style=style))
    return [Text("Why", style="bold"), *lines] if lines else []


def durability_lines(c: Comparison) -> list[RenderableType]:
    """Each run's targets' durability, first: a faster run may be one that skips flushes."""
    lines: list[RenderableType] = []
    for entry in c.durability:
        index = entry.get("target_index")
        same = {str(e.get("verdict")) for e in c.durability if e.get("target_index") == index}
        who = (
            entry["side"] if c.runs[0].target is not None else f"{entry['side']} {entry['target']}"
        )
        text = f"  [{entry['verdict']}] {who}: {entry['reason']}"
        lines.append(Text(text, style="yellow" if len(same) > 1 else ""))
    return [Text("Durability", style="bold"), *lines] if lines else []


def comparison_view(c: Comparison) -> RenderableType:
    notes = _Notes()
    parts: list[RenderableType] = [*durability_lines(c), *why_lines(c)]
    parts += replication_view.compare_parts(c.designs)  # issue 28: the designs of each run
    parts += [Text(line) for line in trials_view.compare_lines(c.trials)]  # issue 38
    if c.tests:
        for other in range(1, len(c.runs)):
            parts += [comparison_table(c, other, notes), *statement_lines(c, other)]
        parts += notes.lines()
    if c.environment:
        parts.append(environment_table(c))
    for rid, label in c.unmatched:
        parts.append(Text(f"only in run {rid}: {label}", style="dim"))
    others = dict.fromkeys(w for t in c.tests for w in t.warnings if not w.startswith("fewer than"))
    for warning in [*c.warnings, *others]:
        parts.append(Text(f"warning: {warning}", style="yellow"))
    return Group(*parts)
