"""Undo what pasting tool output into a document does to it, before it is parsed: Markdown code
fences around it, "> " quote markers before every line, and an indent shared by every line (a
code block, a nested list item, a blog's <pre>). Pure: lines in, lines out."""

from __future__ import annotations

import re

_FENCE = re.compile(r"^\s*(?:```|~~~)")
_QUOTE = re.compile(r"^\s*>\s?")


def unpaste(lines: list[str]) -> list[str]:
    """Lines without fence lines, without quote markers when every non-blank line has one
    (nested quotes too), and without the leading whitespace common to every non-blank line.
    Lines pgbench indents itself (per-statement rows, " - " script lines) keep the rest of
    their indent."""
    for _ in range(8):  # a quote inside a list inside a quote...
        before = lines
        lines = _dedent(_unquote([line for line in lines if not _FENCE.match(line)]))
        if lines == before:
            break
    return lines


def _unquote(lines: list[str]) -> list[str]:
    content = [line for line in lines if line.strip()]
    if not content or not all(_QUOTE.match(line) for line in content):
        return lines
    return [_QUOTE.sub("", line, count=1) for line in lines]


def _dedent(lines: list[str]) -> list[str]:
    indents = [line[: len(line) - len(line.lstrip())] for line in lines if line.strip()]
    if not indents:
        return lines
    # the prefix common to all strings is the one common to the least and the greatest
    low, high = min(indents), max(indents)
    size = 0
    while size < len(low) and low[size] == high[size]:
        size += 1
    common = low[:size]
    if not common:
        return lines
    return [line[len(common) :] if line.strip() else "" for line in lines]
