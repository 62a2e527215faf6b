"""Undo what pasting tool output into a document, a terminal or a log viewer does to it, before
it is parsed. Pure.

- Document structure, over the whole text: Markdown code fences around it, "> " quote markers
  before every line, an indent shared by every line (a code block, a nested list item, a
  blog's <pre>). Whether every line is quoted, and which indent is shared, depend only on the
  lines' leading quote markers and whitespace: `PasteSurvey` gathers those in a first pass
  over the text (one entry per distinct leading part, so a text of millions of lines costs
  no more than its few kinds of lines), and gives the number of characters to remove from
  each line in a second pass.
- Each line: terminal escape sequences (colours, cursor moves, titles, also as `cat -v`
  shows them: "^[[1A"), Markdown emphasis or code marks around a line or a figure
  ("**tps = 12.3 (...)**", "tps = `12.3`"), and lines that a pager joined into one, each
  padded to a fixed width.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

_FENCE = re.compile(r"^\s*(?:```|~~~)")
_QUOTE = re.compile(r"^\s*>\s?")
# the leading part of a line that document structure may have put there
_LEADING = re.compile(r"[\s>]*")


def skeleton(line: str) -> str:
    """What `unpaste` looks at in a line: its leading quote markers and whitespace, then a
    fence, "x" for any other content, or nothing (a blank line)."""
    lead = _LEADING.match(line)
    end = lead.end() if lead is not None else 0
    rest = line[end:]
    if not rest:
        return line
    return line[:end] + (rest[:3] if rest.startswith(("```", "~~~")) else "x")


class PasteSurvey:
    """The first pass: the distinct skeletons of a text's lines, and how long the longest
    line of each is (to find a hard wrap's width after unpasting)."""

    def __init__(self) -> None:
        self.longest: dict[str, tuple[int, int]] = {}  # skeleton -> (length, lines that long)

    def add(self, line: str) -> None:
        # most lines start with their content: no regex for them
        key = "x" if line[:1].isalnum() else skeleton(line)
        length, count = self.longest.get(key, (-1, 0))
        if len(line) > length:
            self.longest[key] = (len(line), 1)
        elif len(line) == length:
            self.longest[key] = (length, count + 1)

    def unpaster(self) -> Unpaster:
        return Unpaster(self)


class Unpaster:
    """The second pass: each line without what pasting added (None: a fence line, dropped)."""

    def __init__(self, survey: PasteSurvey) -> None:
        keys = list(survey.longest)
        self._strip = dict.fromkeys(keys, _DROPPED)  # characters to remove from the start
        for index, text in _unpasted(list(enumerate(keys))):
            self._strip[keys[index]] = len(keys[index]) - len(text)
        widths = [
            (length - self._strip[key], count)
            for key, (length, count) in survey.longest.items()
            if self._strip[key] != _DROPPED
        ]
        self.width = max((width for width, _ in widths), default=0)
        self.lines_at_width = sum(count for width, count in widths if width == self.width)
        # whether a line that starts with its content comes out as it went in
        self.keeps_plain_lines = self._strip.get("x", 0) == 0

    def __call__(self, line: str) -> str | None:
        key = "x" if line[:1].isalnum() else skeleton(line)
        strip = self._strip.get(key, 0)
        if strip == _DROPPED:
            return None
        return line[strip:] if key.strip() else ""


_DROPPED = -1


def unpaste(lines: list[str]) -> list[str]:
    """Lines without fence lines, without quote markers when every non-blank line has one
    (nested quotes too), and without the leading whitespace common to every non-blank line.
    Lines pgbench indents itself (per-statement rows, " - " script lines) keep the rest of
    their indent."""
    return [line for _, line in _unpasted(list(enumerate(lines)))]


def _unpasted(numbered: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """`unpaste` of numbered lines: (index, line) of those kept."""
    for _ in range(8):  # a quote inside a list inside a quote...
        before = numbered
        numbered = [(i, line) for i, line in numbered if not _FENCE.match(line)]
        numbered = _dedent(_unquote(numbered))
        if numbered == before:
            break
    return numbered


def _unquote(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    content = [line for _, line in lines if line.strip()]
    if not content or not all(_QUOTE.match(line) for line in content):
        return lines
    return [(i, _QUOTE.sub("", line, count=1)) for i, line in lines]


def _dedent(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    indents = [line[: len(line) - len(line.lstrip())] for _, line in lines if line.strip()]
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
    return [(i, line[len(common) :] if line.strip() else "") for i, line in lines]


# --- terminal escapes ----------------------------------------------------------------------------

# ECMA-48: CSI (colours, cursor moves, erasing: ESC [ ... final byte, or the 8-bit CSI), OSC
# (a window title: ESC ] ... BEL or ST), and the two-byte sequences (ESC ( B from `tput sgr0`,
# ESC 7, ESC M ...); then the control characters left once lines are split.
_ESCAPE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[ -/]*[0-~]"
    r"|[\x00-\x08\x0b-\x1f\x7f]"
)
# The same in caret notation (`cat -v`, some log viewers): "^[[1A", "^[(B", "^[]0;title^G",
# and "^M" for a carriage return. Only at either end of a line: inside one, "^[a-z]" is as
# likely a regular expression in a statement.
_CARET = r"(?:\^\[\[[0-?]*[ -/]*[@-~]|\^\[\][^^]*(?:\^G|\^\[\\)?|\^\[[ -/]*[0-~]|\^M)"
_CARET_ENDS = re.compile(rf"^{_CARET}+|{_CARET}+$")


def strip_escapes(line: str) -> str:
    """A line without terminal escape sequences and control characters (a tab stays)."""
    if "\x1b" in line or "\x9b" in line or not line.isprintable():
        line = _ESCAPE.sub("", line)
    if "^" in line:
        line = _CARET_ENDS.sub("", line)
    return line


# --- Markdown ------------------------------------------------------------------------------------

# a whole line in emphasis or code marks: **...**, __...__, *...*, _..._, `...`, ``...``,
# also as a list item ("- `tps = ...`")
_MARKED_LINE = re.compile(r"^(?:[-*+]\s+(?=[`*_]))?(\*\*|__|\*|_|`+)(?=\S)(.+?)(?<=\S)\1$")
# a figure in such marks inside a line: "tps = **12.3** (...)"
_MARKED_FIGURE = re.compile(r"(\*\*|__|`)(-?\d+(?:\.\d+)?)\1")


def unmark(line: str) -> str:
    """A line without the Markdown marks a writer put around it or around one of its
    figures, to show it off."""
    for _ in range(3):  # **`tps = ...`**
        m = _MARKED_LINE.match(line)
        if m is None:
            break
        line = m[2]
    return _MARKED_FIGURE.sub(r"\2", line)


# --- lines a pager joined ------------------------------------------------------------------------

MIN_RECORD = 40  # narrower records are not a pager's page width


def split_records(line: str, is_line: Callable[[str], bool]) -> list[str]:
    """A line that is several lines joined, each padded with spaces to one width (a pager
    or a fixed-record log viewer), as those lines; any other line alone. The width is where
    a record starts after the first record's padding, and it must cut the line into pieces
    most of which `is_line` says are lines of their own."""
    if len(line) < 2 * MIN_RECORD or "   " not in line:
        return [line]
    for m in _record_starts(line):
        width = m.end()
        if width < MIN_RECORD:
            continue
        pieces = [line[i : i + width] for i in range(0, len(line), width)]
        padded = all(piece.endswith(" ") for piece in pieces[:-1])
        if padded and sum(map(is_line, (p.strip() for p in pieces))) * 2 > len(pieces):
            return [piece.rstrip() for piece in pieces]
    return [line]


def _record_starts(line: str) -> Iterable[re.Match[str]]:
    """Where a run of padding ends, for the first few runs: candidates for the width."""
    for count, m in enumerate(re.finditer(r"\S {2,}(?=\S)", line)):
        if count == 8:
            return
        yield m
