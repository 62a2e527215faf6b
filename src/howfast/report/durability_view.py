"""Durability and advice as the terminal and the reports show them: durability first, before
any figure, and the advice after the verdicts (analysis/durability.py, analysis/advice.py).
Formatting only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import RenderableType
from rich.text import Text

from howfast.analysis.advice import advice_lines
from howfast.analysis.durability import DurabilityLine, durability_lines
from howfast.model import RunRecord
from howfast.report.tables import Cell, Table

Block = Table | str

STYLE = {"not durable": "bold red", "in doubt": "yellow", "durable": "green", "unknown": "dim"}
ADVICE_INTRO = (
    "Settings worth trying, from what was measured; howfast changed none of them, and each "
    "should be measured before it is kept."
)
DURABILITY_INTRO = (
    "Whether the commits measured could survive a crash of the machine, from the settings, "
    "the devices under the data and WAL and the flush times measured (docs/why.md)."
)
MANY_TARGETS = 6  # beyond this (a fleet), one line per verdict instead of one per target


def grouped(lines: Sequence[DurabilityLine]) -> list[tuple[str, str]]:
    """(verdict, sentence) per target; for many targets, one per verdict, with the count and
    the first target's sentence."""
    if len(lines) <= MANY_TARGETS:
        return [(line.verdict, line.sentence) for line in lines]
    out = []
    verdicts = dict.fromkeys(line.verdict for line in lines)
    for verdict in verdicts:
        held = [line for line in lines if line.verdict == verdict]
        out.append((verdict, f"{len(held)} of {len(lines)} targets, e.g. {held[0].sentence}"))
    return out


def durability_parts(run: RunRecord) -> list[RenderableType]:
    lines = grouped(durability_lines(run))
    if not lines:
        return []
    parts: list[RenderableType] = [Text("Durability", style="bold")]
    for verdict, sentence in lines:
        text = Text("  ")
        text.append(f"[{verdict}] ", style=STYLE.get(verdict, "bold"))
        text.append(sentence)
        parts.append(text)
    return parts


def advice_parts(run: RunRecord) -> list[RenderableType]:
    lines = advice_lines(run)
    if not lines:
        return []
    parts: list[RenderableType] = [Text("Advice", style="bold"), Text(f"  {ADVICE_INTRO}")]
    parts += [Text(f"  {line.sentence}") for line in lines]
    return parts


def durability_table(runs: Sequence[RunRecord], titles: Mapping[int, Mapping[str, str]]) -> Table:
    """The report's Durability table: a row per target (per verdict for a fleet)."""
    table = Table("durability", "Durability of each target", ["verdict", "target and why"])
    for run in runs:
        for verdict, sentence in grouped(durability_lines(run, titles.get(run.id))):
            table.rows.append([Cell(verdict), Cell(sentence)])
    return table


def advice_table(runs: Sequence[RunRecord], titles: Mapping[int, Mapping[str, str]]) -> Table:
    table = Table("advice", "Advice", ["target", "setting", "now", "try", "why", "source"])
    for run in runs:
        for line in advice_lines(run, titles.get(run.id)):
            doc = line.doc
            current = doc.get("current")
            table.rows.append(
                [
                    Cell(line.title),
                    Cell(f"{doc.get('setting')} = {doc.get('value')}"),
                    Cell(str(current) if current is not None else "–"),
                    Cell(str(doc.get("try") or doc.get("note") or "–")),
                    Cell(str(doc.get("reason"))),
                    Cell(str(doc.get("source"))),
                ]
            )
    return table


def report_sections(
    runs: Sequence[RunRecord], titles: Mapping[int, Mapping[str, str]]
) -> tuple[list[Block], list[Block]]:
    """(the Durability section's blocks, the Advice section's); empty when there is none."""
    durability = durability_table(runs, titles)
    advice = advice_table(runs, titles)
    return (
        [DURABILITY_INTRO, durability] if durability.rows else [],
        [ADVICE_INTRO, advice] if advice.rows else [],
    )
