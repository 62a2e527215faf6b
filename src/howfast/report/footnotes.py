"""Warnings as numbered notes under a terminal table: a cell shows [1], the text is printed
under the table."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text


class Footnotes:
    """Warnings numbered once each, in the order they are first referred to."""

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
        return ranges([self.texts.index(w) + 1 for w in warnings])

    def lines(self) -> list[RenderableType]:
        return [Text(f"  [{n}] {text}") for n, text in enumerate(self.texts, start=1)]


def ranges(numbers: list[int]) -> str:
    """'[1]', '[1-4] [7]': note numbers, runs of them shortened to fit a narrow column."""
    runs: list[list[int]] = []
    for n in sorted(set(numbers)):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return " ".join(f"[{r[0]}]" if len(r) == 1 else f"[{r[0]}-{r[-1]}]" for r in runs)
