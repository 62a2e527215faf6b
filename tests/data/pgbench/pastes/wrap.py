#!/usr/bin/env python3
"""Remake the wrapped pastes of this directory (README.md, "Wrapped") from the outputs one
directory up. From the repository:

    python3 tests/data/pgbench/pastes/wrap.py

Each long line is broken as a page or a terminal breaks it, at 80 columns (or not at all):
- `word`: at the last space before column 81, the space dropped (a web page, a mail client,
  a word processor: a copy of what they show keeps the breaks);
- `hard`: at column 80, mid-word (`fold -w 80`, a terminal or log viewer copy);
- a continuation line may start with `hang` spaces (a hanging indent, as some page layouts and
  editors show a wrapped line: aligned under the statement).
Before the wrap, `indent` spaces may be put before every line (a code block, a quote in a mail)
and the lines of a script block may lose their " - " (a rendered page showing them as a list:
its bullets are not copied) or every line its leading whitespace (a log shipper).
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).parent
WIDTH = 80


def wrapped(line: str, *, width: int | None, hard: bool, hang: int) -> list[str]:
    """One line as a page of `width` columns shows it."""
    pieces: list[str] = []
    while True:
        lead = " " * hang if pieces else ""
        room = (width or len(line)) - len(lead)
        if len(line) <= room:
            return [*pieces, lead + line]
        cut = line.rfind(" ", len(line) - len(line.lstrip()) + 1, room + 1)
        if hard or cut < 0:
            pieces.append(lead + line[:room])
            line = line[room:]
        else:
            pieces.append(lead + line[:cut])
            line = line[cut + 1 :]


def paste(
    source: str,
    target: str,
    *,
    width: int | None = WIDTH,
    hard: bool = False,
    hang: int = 0,
    indent: int = 0,
    list_items: bool = False,
    lstrip: bool = False,
) -> None:
    out: list[str] = []
    for line in (HERE.parent / source).read_text().splitlines():
        if list_items:
            line = re.sub(r"^ - ", "", line)
        if lstrip:
            line = line.lstrip()
        out += wrapped(" " * indent + line, width=width, hard=hard, hang=hang)
    (HERE / target).write_text("".join(line + "\n" for line in out))


def main() -> None:
    # a statement table wrapped: pgbench 15's real output, 16's and 14's formats
    paste("run-tpcb-pg15.txt", "statements-word-wrapped-80-pg15.txt")
    paste("run-tpcb-pg15.txt", "statements-folded-80-pg15.txt", hard=True)
    paste("run-retries-pg15.txt", "statements-word-wrapped-80-retries-pg15.txt")
    paste("run-tpcb-pg15.txt", "statements-hanging-indent-80-pg15.txt", hang=28)
    paste("run-simple-update-pg16.txt", "statements-indented-80-pg16.txt", indent=4, hang=4)
    paste("run-tpcb-pg14.txt", "statements-word-wrapped-80-pg14.txt")
    # 9.6: an old-style init, then a rate-limited run with -P and -r
    paste("init-rate-run-pg96.txt", "init-rate-run-pg96-folded-80.txt", hard=True)
    paste("init-rate-run-pg96.txt", "init-rate-run-pg96-list.txt", list_items=True, width=None)
    paste("init-rate-run-pg96.txt", "init-rate-run-pg96-list-80.txt", list_items=True)
    paste("init-rate-run-pg96.txt", "init-rate-run-pg96-lstripped-80.txt", lstrip=True)


if __name__ == "__main__":
    main()
