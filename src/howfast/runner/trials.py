"""The line each trial (`--trials`) ends with on stderr: `trial 7/20: 0.9 s down, 0 lost`,
from the trial's own event figures (analysis/events.py), as `results show` derives them."""

from __future__ import annotations

from howfast.analysis.events import EventFigures, step_figures
from howfast.model import StepRecord
from howfast.runner.step import error_gist


def trial_line(record: StepRecord) -> str | None:
    """The stored step's trial line; None for a step that is not one of a step's trials."""
    trials = record.params.get("trials")
    if not isinstance(trials, int):
        return None
    number = record.params.get("repetition", 1)
    head = f"trial {number}/{trials}"
    if record.status != "completed":
        return f"{head}: {record.status}: {error_gist(record.error)}"
    figures = step_figures(record.sections, record.histograms)
    if not figures:
        return f"{head}: no event figures"
    return f"{head}: {figures_text(figures)}"


def figures_text(figures: list[EventFigures]) -> str:
    """'0.9 s down, 0 lost': the outage of every applied event added up, and the commits
    proven lost (with the most that may be, when some are in doubt)."""
    parts: list[str] = []
    for fig in figures:
        if fig.mark.applied_s is None:
            parts.append(f"{fig.mark.action} not applied")
    downs = [f.downtime_s for f in figures if f.downtime_s is not None]
    if downs:
        until_end = any(f.gap is not None and not f.gap.closed for f in figures)
        parts.insert(0, f"{sum(downs):.1f} s down" + (" until the end" if until_end else ""))
    counted = [f.lost for f in figures if f.lost is not None]
    if counted:
        lost = sum(c.lost for c in counted)
        most = sum(c.lost_max for c in counted)
        doubt = sum(c.in_doubt for c in counted)
        parts.append(f"{lost} lost" if most == lost else f"{lost} lost ({doubt} in doubt)")
    elif any(f.lost_note for f in figures if f.mark.applied_s is not None):
        note = next(f.lost_note for f in figures if f.lost_note and f.mark.applied_s is not None)
        parts.append(f"commits not counted ({note})")
    return ", ".join(parts) or "no figures"
