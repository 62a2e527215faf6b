"""`--until ci=2%` and `--budget 10m` (or the plan's `until` and `budget` keys): repeat each
measuring test, targets interleaved, until the 95% confidence interval of its figures is as
narrow as asked or the time budget is spent.

Pure: the rule, its parser and its checks; the runner (runner/interleaved.py) applies it, and
analysis/until.py judges the figures with it, while running and when a run is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from howfast.errors import UsageError
from howfast.model import JSONValue, StepSpec
from howfast.units import duration_seconds, quote
from howfast.until_rule import DEFAULT_MAX_REPETITIONS, MIN_REPETITIONS, width_text

EXAMPLE = "ci=2% (optionally ci=2%,max=20)"

_WIDTH = re.compile(r"ci\s*=\s*([0-9]*\.?[0-9]+)\s*(%?)")
_MAX = re.compile(r"max\s*=\s*([0-9]+)")


@dataclass(frozen=True)
class UntilRule:
    """Repeat each test at least `minimum` and at most `maximum` times, until every judged
    figure's 95% interval is within ±`ci` of its mean (a fraction: 0.02 for 2%), or until
    `budget_s` seconds of the run are spent (None: no budget)."""

    ci: float
    budget_s: float | None = None
    minimum: int = MIN_REPETITIONS
    maximum: int = DEFAULT_MAX_REPETITIONS
    text: str = ""  # as the user wrote it, e.g. "ci=2%"

    def __post_init__(self) -> None:
        if not 0 < self.ci < 1:
            raise ValueError(f"the width must be above 0% and below 100%, got {self.ci:.4g}")
        if self.maximum < self.minimum:
            raise ValueError(
                f"max={self.maximum} is below the minimum of {self.minimum} repetitions"
            )
        if self.budget_s is not None and self.budget_s <= 0:
            raise ValueError("the budget must be more than zero")

    @property
    def percent(self) -> str:
        """'2%', '0.5%'."""
        return width_text(self.ci)

    def params(self) -> dict[str, JSONValue]:
        """What a repetition records of the rule it ran under (`params.until`)."""
        return {
            "ci": self.ci,
            "min": self.minimum,
            "max": self.maximum,
            "budget_s": self.budget_s,
        }

    def describe(self) -> str:
        budget = f", or until {_seconds(self.budget_s)} are spent" if self.budget_s else ""
        return (
            f"each measuring test repeats, targets interleaved (A B B A ...), at least "
            f"{self.minimum} and at most {self.maximum} times, until the 95% interval of each "
            f"judged figure is within ±{self.percent} of its mean{budget}"
        )


@dataclass(frozen=True)
class Block:
    """A step of the plan as an `--until` run sees it: a test to repeat (`repeated`), or a
    step run once on each target (pgbench-init, a warm-up)."""

    spec: StepSpec
    repeated: bool


def parse_width(text: str) -> tuple[float, int | None]:
    """'ci=2%' -> (0.02, None); 'ci=2%,max=20' -> (0.02, 20). ValueError with the reason."""
    width: float | None = None
    maximum: int | None = None
    for part in (p.strip().lower() for p in text.split(",")):
        if match := _WIDTH.fullmatch(part):
            if not match.group(2):
                raise ValueError(f"{quote(text)}: the width needs a %, e.g. ci={match.group(1)}%")
            width = float(match.group(1)) / 100
        elif match := _MAX.fullmatch(part):
            maximum = int(match.group(1))
        elif part.startswith("ci") and "-" in part:
            raise ValueError(f"{quote(text)}: the width must be above 0%")
        else:
            raise ValueError(f"{quote(text)} is not a stopping rule; write {EXAMPLE}")
    if width is None:
        raise ValueError(f"{quote(text)} gives no width; write {EXAMPLE}")
    if not 0 < width < 1:
        raise ValueError(f"{quote(text)}: the width must be above 0% and below 100%")
    if maximum is not None and maximum < MIN_REPETITIONS:
        raise ValueError(f"{quote(text)}: max must be {MIN_REPETITIONS} or more")
    return width, maximum


def check_until(text: str) -> str:
    """A plan's `until` value, checked (pydantic validator: ValueError with the reason)."""
    parse_width(text)
    return text


def make_rule(
    until: str | None,
    budget: str | float | None,
    *,
    repeat: int | None = None,
    until_option: str = "--until",
    budget_option: str = "--budget",
) -> UntilRule | None:
    """The rule from --until/--budget (or the plan's keys); None without a width.

    `repeat` (--repeat or the plan's) raises the minimum number of repetitions: with
    `--until`, `--repeat N` means "at least N"."""
    if until is None:
        if budget is not None:
            raise UsageError(
                f"{budget_option} needs {until_option}: a budget bounds the repetitions of a width",
                hint=f"e.g. {until_option} ci=2% {budget_option} 10m",
            )
        return None
    try:
        width, maximum = parse_width(until)
    except ValueError as e:
        raise UsageError(f"{until_option}: {e}") from None
    budget_s: float | None = None
    if budget is not None:
        try:
            budget_s = duration_seconds(budget)
        except ValueError as e:
            raise UsageError(f"{budget_option}: {e}", hint="e.g. 90s, 10m, 1h") from None
    minimum = max(MIN_REPETITIONS, repeat or 0)
    top = maximum if maximum is not None else max(DEFAULT_MAX_REPETITIONS, minimum)
    if top < minimum:
        raise UsageError(
            f"{until_option}: max={top} is below the minimum of {minimum} repetitions "
            "(--repeat with --until sets the minimum)"
        )
    return UntilRule(width, budget_s, minimum, top, text=until.strip())


def _seconds(seconds: float) -> str:
    if seconds >= 120:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"
