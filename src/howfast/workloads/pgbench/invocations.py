"""A text that holds several pgbench invocations one after the other (a loop over rates or
client counts, logs pasted together) split into one part per invocation, each parsed.

Pure. A part ends where its run's summary was printed and a line comes that only a new
invocation prints: an echoed command, the version line, "starting vacuum", an init line, an
error (other than pgbench's "Run was aborted" after its results), a progress line when the
part already has progress, or a summary line the part already has. A part without a summary
that failed (errors) also ends at a new invocation's first line. A text with one summary at
most is one part, whatever its order, as `parse.parse_any` reads it (stdout and stderr may
come in any order there).
"""

from __future__ import annotations

from dataclasses import replace

from howfast.workloads.pgbench.parse import (
    PgbenchInit,
    PgbenchRun,
    clean_lines,
    line_role,
    parse_lines,
)

Parsed = PgbenchInit | PgbenchRun

# what only the start of an invocation prints
_STARTS = frozenset({"command", "version", "vacuum"})


class _Part:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.summary_keys: set[str] = set()
        self.init_done = False
        self.progress = False
        self.errors = False

    @property
    def finished(self) -> bool:
        """Whether pgbench printed the end of what this part holds: a summary, an init's end."""
        return bool(self.summary_keys) or self.init_done

    def ends_before(self, role: str, key: str | None) -> bool:
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

    def add(self, line: str, role: str, key: str | None) -> None:
        self.lines.append(line)
        if role == "summary" and key is not None:
            self.summary_keys.add(key)
        self.init_done = self.init_done or (role == "init" and key == "done")
        self.progress = self.progress or role == "progress"
        self.errors = self.errors or role == "error"


def split_lines(lines: list[str]) -> list[list[str]]:
    """Cleaned lines cut into the parts of successive invocations, in order."""
    parts = [_Part()]
    for line in lines:
        role, key = line_role(line)
        if parts[-1].ends_before(role, key):
            parts.append(_Part())
        parts[-1].add(line, role, key)
    if sum(1 for part in parts if part.finished) <= 1:
        return [lines]
    return [part.lines for part in parts if any(line.strip() for line in part.lines)]


def parse_all(text: str) -> list[Parsed]:
    """Every init and run in a pgbench output, in the order they were printed."""
    found: list[Parsed] = []
    for part in split_lines(clean_lines(text)):
        init, run = parse_lines(part)
        found += [item for item in (init, run) if item is not None]
    return _progress_to_its_run(found)


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
