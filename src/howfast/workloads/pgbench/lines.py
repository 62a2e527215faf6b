"""The lines pgbench printed, out of a text as people paste it: stdout and stderr in any order,
a copy from a terminal (escape sequences, long lines hard-wrapped, every line padded to the
console's width), `kubectl logs` (with `--timestamps` or `--prefix`), a document (fenced,
quoted, indented, Markdown marks around a line: see `pasted`), a pager's fixed-width records,
a log shipper's lost indentation.

The text is read twice and never held whole: a `LineSource` gives its lines again at each
call. The first pass surveys it (the shared indent, quote markers, the width a terminal
wrapped it at), the second gives the cleaned lines one at a time. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from howfast.workloads.pgbench.grammar import (
    STATEMENT_LINE,
    is_script_block_line,
    looks_known,
    looks_whole,
)
from howfast.workloads.pgbench.pasted import (
    MIN_RECORD,
    PasteSurvey,
    split_records,
    strip_escapes,
    unmark,
)

# The text's lines, without their line ends, read from the start at each call.
LineSource = Callable[[], Iterable[str]]

# kubectl logs --prefix / --timestamps
_KUBECTL_PREFIX = re.compile(r"^\[(?:pod|deployment|job)/[^\]]*\]\s?")
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)\s")
# a terminal narrower than this did not wrap the text
MIN_WRAP_WIDTH = 40
MIN_RECORDS_LINE = 2 * MIN_RECORD  # a shorter line is not several a pager joined


def clean(raw: str) -> str:
    """A line without escape sequences, kubectl's prefix, trailing whitespace and Markdown
    marks around it."""
    line = strip_escapes(raw)
    if line.startswith("["):
        line = _KUBECTL_PREFIX.sub("", line)
    if line[:1].isdigit():
        line = _TIMESTAMP.sub("", line)
    line = line.rstrip()
    if ("`" in line or "**" in line or "__" in line or line[:1] in ("*", "_")) and (
        STATEMENT_LINE.match(line) is None  # a statement's own marks stay
    ):
        line = unmark(line)
    return line


def looks_own(line: str) -> bool:
    """Whether a cleaned line is one pgbench prints on its own, at whatever indent."""
    stripped = line.lstrip()
    return looks_known(line) or (stripped != line and looks_known(stripped))


def reindent(line: str) -> str:
    """A line of pgbench's at the indent pgbench gives it, whatever indent it came with: none
    for summary lines, " - " for the lines of a script block. Per-statement rows are read by
    their columns, whatever their indent; other lines are left alone. A script line that
    lost its indent ("- latency average = ...", as log shippers leave it) gets it back."""
    stripped = line.lstrip()
    if STATEMENT_LINE.match(line):
        return line
    if stripped.startswith("- "):
        dashed = " - " + stripped[2:]
        return dashed if stripped != line or is_script_block_line(dashed) else line
    if stripped == line:
        return line
    return stripped if looks_known(stripped) else line


def _plain(raw: str) -> bool:
    """A line that `clean` and `reindent` leave as it is but for trailing whitespace: most
    lines of a long text (progress lines), told cheaply."""
    return (
        raw[:1].isalpha()
        and raw.isascii()
        and raw.isprintable()
        and "^" not in raw
        and "`" not in raw
        and "*" not in raw
        and "__" not in raw
    )


def records(raw: str) -> list[str]:
    """A raw line, or the lines a pager joined into it (see `pasted.split_records`)."""
    return split_records(raw, lambda piece: looks_own(clean(piece)))


class CleanText:
    """A text's lines as pgbench printed them; `lines()` may be read several times."""

    def __init__(self, source: LineSource) -> None:
        self._source = source
        survey = PasteSurvey()
        for raw in source():
            if len(raw) < MIN_RECORDS_LINE:
                survey.add(raw)
                continue
            for record in records(raw):
                survey.add(record)
        self._unpaste = survey.unpaster()

    def lines(self) -> Iterator[str]:
        """The cleaned lines, hard-wrapped ones joined back."""
        for raw in self._unwrapped(self._unpasted()):
            if _plain(raw):
                yield raw.rstrip()  # what clean and reindent make of it, sooner
            else:
                yield reindent(clean(raw))

    def _unpasted(self) -> Iterator[str]:
        unpaste = self._unpaste
        plain_kept = unpaste.keeps_plain_lines
        for raw in self._source():
            for record in records(raw) if len(raw) >= MIN_RECORDS_LINE else (raw,):
                if plain_kept and record[:1].isalnum():
                    yield record  # what unpaste makes of it, sooner
                    continue
                line = unpaste(record)
                if line is not None:
                    yield line

    def _unwrapped(self, raw_lines: Iterable[str]) -> Iterator[str]:
        """Undo a hard wrap at a fixed width (a terminal or log viewer copy): a line exactly as
        long as the longest one is joined with the next when that one is not a line pgbench
        prints on its own, exactly (the wrap split at a column, not at a word). Several lines
        must be that long (a single one only when it is a statement row: one long statement
        wrapped once). Not joined: a line padded with spaces (a console copy pads every line
        to its width), and a line pgbench printed whole (a tps line) when the join would not
        be one (a wrapper script's next line)."""
        width, at_width = self._unpaste.width, self._unpaste.lines_at_width
        if width < MIN_WRAP_WIDTH or at_width == 0:
            yield from raw_lines
            return
        only_rows = at_width == 1
        # Pieces are gathered and joined once: appending each to a growing string copies it
        # again every time, which is quadratic in a text of many wrapped lines.
        pieces: list[str] = []
        for raw in raw_lines:
            if pieces and len(pieces[-1]) == width and _continues(pieces, raw, only_rows):
                # a run of spaces first is a hanging indent (a cut keeps a single space)
                pieces.append(" " + raw.lstrip() if raw.startswith("  ") else raw)
                continue
            if pieces:
                yield "".join(pieces)
            pieces = [raw]
        if pieces:
            yield "".join(pieces)


def _continues(pieces: list[str], raw: str, only_rows: bool) -> bool:
    """Whether `raw` is the rest of the line whose pieces so far are `pieces`, the last as
    long as the wrap's width. Only the first piece is looked at whole: a line wrapped many
    times is joined in linear time."""
    last = pieces[-1]
    if not raw or last.endswith("  "):
        return False
    if looks_own(clean(raw)):
        return False
    if len(pieces) > 1:
        return True
    first = clean(last)
    if only_rows and STATEMENT_LINE.match(first) is None:
        return False
    return not looks_whole(first) or looks_whole(clean(last + raw))


def clean_lines(text: str) -> list[str]:
    """The lines pgbench printed in a text held whole (see `CleanText`). A carriage return
    (pgbench's progress overwrite on a terminal) ends a line."""
    return list(CleanText(text.splitlines).lines())
