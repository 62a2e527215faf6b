"""The server log's new lines since a point: what a restart or a crash wrote there."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from howfast.targets.base import Target
from howfast.targets.capabilities import HasLocalServer

SHUT_DOWN = "database system was shut down at"
CRASHED = "database system was not properly shut down; automatic recovery in progress"
REDO_DONE = re.compile(r"redo done at .*elapsed: ([0-9.]+) s")
CHECKPOINT_DONE = "checkpoint complete"


@dataclass(frozen=True)
class LogPoint:
    path: Path
    offset: int

    @classmethod
    def now(cls, target: Target) -> LogPoint | None:
        """Where the log ends now; None when the target's log cannot be read here."""
        path = target.server_log_file() if isinstance(target, HasLocalServer) else None
        if path is None:
            return None
        try:
            return cls(path, path.stat().st_size)
        except OSError:
            return None

    def lines_since(self) -> list[str]:
        try:
            with self.path.open("rb") as log:
                log.seek(self.offset)
                return log.read().decode(errors="replace").splitlines()
        except OSError:
            return []


def first_with(lines: list[str], text: str) -> str | None:
    return next((line.strip() for line in lines if text in line), None)
