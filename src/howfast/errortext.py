"""A stored step's error as people read it (pure): its first line says what failed, the next
ones why (pgbench's or fio's own last words: "No space left on device"), and the server log's
tail, marked, follows; `results show --json` has all of it."""

from __future__ import annotations

CAUSE_LINES = 6  # of a failed step's error, shown under its first line
SERVER_LOG_MARK = "--- server log"


def error_cause(error: str | None) -> list[str]:
    """The lines after an error's first that say why (no space left, too many open files...),
    up to the server log's tail."""
    lines = (error or "").splitlines()[1:]
    cause = []
    for line in lines:
        if line.startswith(SERVER_LOG_MARK):
            break
        if line.strip():
            cause.append(line.rstrip())
    return cause[-CAUSE_LINES:]


def error_summary(error: str | None) -> str:
    """The first line and the lines that say why, one per line: what a table shows."""
    lines = (error or "").strip().splitlines()
    if not lines:
        return ""
    return "\n".join([lines[0].rstrip(), *error_cause(error)])
