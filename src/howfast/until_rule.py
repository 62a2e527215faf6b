"""The words of the `--until ci=N%` rule that plans, the runner and analysis share: how many
repetitions at least and at most, how a width is written, and why a test stopped repeating.
The rule itself is plans/until.py's; what it reached, analysis/until.py's."""

from __future__ import annotations

MIN_REPETITIONS = 3  # fewer behind a comparison: the test has little power
DEFAULT_MAX_REPETITIONS = 30  # beyond this the spread is the machine's, not a lack of runs


def width_text(ci: float) -> str:
    """A rule's width as the user writes it: '2%', '0.5%'."""
    return f"{ci * 100:g}%"


# Why a test stopped repeating.
REACHED = "reached"  # every judged figure's interval is within the width
BUDGET = "budget"  # its share of the time budget was spent
MAXIMUM = "maximum"  # the maximum number of repetitions
FAILED = "failed"  # a repetition failed: repeating a failure only loses time
UNJUDGED = "unjudged"  # nothing to judge: the minimum number of repetitions ran
INTERRUPTED = "interrupted"  # the run was stopped (Ctrl-C) during this test

STOPPED_WHY = {
    REACHED: "every figure reached the width",
    BUDGET: "the time budget was spent",
    MAXIMUM: "the maximum number of repetitions ran",
    FAILED: "a repetition failed",
    UNJUDGED: "no figure to judge; the minimum number of repetitions ran",
    INTERRUPTED: "the run was interrupted",
}
