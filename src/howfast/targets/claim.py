"""Which directories howfast may use, and marking the ones it created.

A target directory must exist and be empty, or carry howfast's marker from an earlier run.
That rule keeps howfast away from data it did not create: a typo in --target fails here.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from howfast.errors import UsageError
from howfast.targets.dirlock import INFO as LOCK_INFO

MARKER = ".howfast-owned"
# What a fresh filesystem has at its root; harmless to sit beside.
IGNORABLE = {"lost+found"}


@dataclass
class Claim:
    directory: Path
    created_marker: bool = False

    def release(self) -> None:
        """Remove the marker when this run wrote it and nothing of ours is left beside it."""
        marker = self.directory / MARKER
        if not self.created_marker or not marker.exists():
            return
        others = [
            p for p in self.directory.iterdir() if p.name not in {MARKER, LOCK_INFO, *IGNORABLE}
        ]
        if not others:
            marker.unlink()


def check_directory(directory: Path, role: str) -> None:
    """Refuse a missing, unwritable, or foreign non-empty directory. `role` names it in errors."""
    if not directory.exists():
        raise UsageError(
            f"{role} {directory} does not exist",
            "create it first; howfast does not create target directories",
        )
    if not directory.is_dir():
        raise UsageError(f"{role} {directory} is not a directory")
    if os.statvfs(directory).f_flag & os.ST_RDONLY:
        raise UsageError(
            f"{role} {directory} is on a read-only filesystem",
            "remount it read-write, or give a directory on writable storage",
        )
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"{role} {directory} is not writable by this user")
    if (directory / MARKER).exists():
        return
    foreign = [
        p.name
        for p in directory.iterdir()
        if p.name != LOCK_INFO  # who holds the run lock (targets/dirlock.py)
        and not (p.name in IGNORABLE and p.is_dir() and not any(p.iterdir()))
    ]
    if foreign:
        shown = ", ".join(sorted(foreign)[:3]) + (" ..." if len(foreign) > 3 else "")
        raise UsageError(
            f"{role} {directory} is not empty ({shown}) and was not created by howfast",
            "give an empty directory; howfast never touches data it did not create",
        )


def claim_directory(directory: Path) -> Claim:
    marker = directory / MARKER
    if marker.exists():
        return Claim(directory, created_marker=False)
    marker.write_text(json.dumps({"created_by": "howfast", "pid": os.getpid()}) + "\n")
    return Claim(directory, created_marker=True)
