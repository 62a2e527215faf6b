"""A text that holds several pgbench invocations one after the other (a loop over rates or
client counts, logs pasted together) split into one part per invocation, each parsed.

Pure. A part ends where its run's summary was printed and a line comes that only a new
invocation prints: an echoed command, the version line, "starting vacuum", an init line, an
error (other than pgbench's "Run was aborted" after its results), a progress line when the
part already has progress, or a summary line the part already has. A part without a summary
that failed (errors) also ends at a new invocation's first line. A text with one summary at
most is one part, whatever its order, as `parse.parse_any` reads it (stdout and stderr may
come in any order there).

The text is read line by line and each part parsed as its lines come (`parse.PartParser`),
so that a long text is never held whole: twice (lines.py's survey, then the parts), three
times when it turns out to be one invocation printed out of order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from howfast.workloads.pgbench.grammar import (
    PROGRESS,
    LineRole,
    is_script_block_line,
    line_role,
    opens_script_block,
)
from howfast.workloads.pgbench.lines import CleanText, LineSource
from howfast.workloads.pgbench.parse import PartParser, PgbenchInit, PgbenchRun

Parsed = PgbenchInit | PgbenchRun

# what only the start of an invocation prints
_STARTS = frozenset({"command", "version", "vacuum"})


class _Part:
    """One invocation's lines as they come: what ends it, and their parse."""

    def __init__(self) -> None:
        self.summary_keys: set[str] = set()
        self.init_done = False
        self.progress = False
        self.errors = False
        self.content = False  # a line that is not blank
        self.script_block = False  # after the summary's per-script part began
        self.parser = PartParser()

    @property
    def finished(self) -> bool:
        """Whether pgbench printed the end of what this part holds: a summary, an init's end."""
        return bool(self.summary_keys) or self.init_done

    def ends_before(self, role: LineRole, key: str | None) -> bool:
        if self.init_done and not self.summary_keys:
            return role in _STARTS or role in ("init", "error")
        if not self.summary_keys:
            return self.errors and role in _STARTS
        return (
            role in _STARTS
            or role in ("init", "error")
            or (role == "progress" and self.progress)
            or (role == "summary" and key in self.summary_keys)
        )

    def role(self, line: str) -> tuple[LineRole, str | None]:
        """A line's `line_role` in this part: in a script block, a summary line that a script
        block prints too ("number of transactions skipped: ...", "latency average = ...") is
        that script line, its " - " lost in pasting (parse.py reads it so)."""
        role, key = line_role(line)
        if self.script_block and role == "summary" and is_script_block_line(" - " + line):
            return "other", None
        return role, key

    def add(self, line: str, role: LineRole, key: str | None) -> None:
        self.script_block = self.script_block or opens_script_block(line)
        self.parser.feed(line, role)
        if role == "summary" and key is not None:
            self.summary_keys.add(key)
        self.init_done = self.init_done or (role == "init" and key == "done")
        self.progress = self.progress or role == "progress"
        self.errors = self.errors or role == "error"
        self.content = self.content or bool(line.strip())


def _parts(lines: Iterable[str]) -> list[_Part]:
    """Cleaned lines cut into the parts of successive invocations, in order, each parsed."""
    parts = [_Part()]
    part = parts[0]
    for line in lines:
        if line.startswith("progress: ") and (progress := PROGRESS.match(line)) is not None:
            # most lines of a long text: `ends_before` and `add` of a progress line, inline
            if part.summary_keys and part.progress:
                part = _Part()
                parts.append(part)
            part.parser.feed_progress(progress, line)
            part.progress = part.content = True
            continue
        role, key = part.role(line)
        if part.ends_before(role, key):
            part = _Part()
            parts.append(part)
        part.add(line, role, key)
    return parts


def parse_all(text: str) -> list[Parsed]:
    """Every init and run in a pgbench output held in memory, in the order they were printed."""
    return parse_source(text.splitlines)


def parse_source(source: LineSource) -> list[Parsed]:
    """Every init and run in a pgbench output read from `source`, in the order they were
    printed."""
    text = CleanText(source)
    parts = _parts(text.lines())
    if sum(part.finished for part in parts) <= 1 and len(parts) > 1:
        # One invocation at most, its stdout and stderr in any order: read it as one part.
        parts = _parts_of_one(text.lines())
    found: list[Parsed] = []
    for part in parts:
        if part.content:
            found += [item for item in part.parser.finish() if item is not None]
    return _progress_to_its_run(found)


def _parts_of_one(lines: Iterable[str]) -> list[_Part]:
    whole = _Part()
    for line in lines:
        whole.add(line, *whole.role(line))
    return [whole]


def _progress_to_its_run(found: list[Parsed]) -> list[Parsed]:
    """A run's stderr (progress lines) printed after its stdout (the summary) reads as a part
    of its own, with progress and nothing else: give it back to the latest run without
    progress."""
    out: list[Parsed] = []
    for item in found:
        if isinstance(item, PgbenchRun) and _progress_only(item):
            for i in range(len(out) - 1, -1, -1):
                earlier = out[i]
                if isinstance(earlier, PgbenchRun) and not earlier.progress:
                    out[i] = replace(earlier, progress=item.progress)
                    break
            else:
                out.append(item)
            continue
        out.append(item)
    return out


def _progress_only(run: PgbenchRun) -> bool:
    summary = (run.tps, run.transactions, run.clients, run.mode, run.duration_s)
    return bool(run.progress) and not run.errors and all(v is None for v in summary)
