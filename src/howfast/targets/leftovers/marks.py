"""The marks that tell a later howfast whose something is.

- A private directory (in /dev/shm, or the temp directory) gets an owner record when it is
  made: the howfast process that made it (host, boot id, PID and start time: the same test of
  liveness as the results store's, store/liveness.py), the target directories it serves and
  the run token. `howfast cleanup` removes it only once that process is certainly gone.
- A cluster kept with --keep gets a kept mark: it outlives its run on purpose, and cleanup
  leaves it alone.

Directories inside a target directory need no record of their own: the run holds the target
directory's lock (targets/dirlock.py) for as long as they exist.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from howfast.store import liveness

OWNER = ".howfast-owner"
KEPT = ".howfast-kept"


@dataclass(frozen=True)
class OwnerRecord:
    writer: liveness.Writer | None
    directories: tuple[str, ...] = ()  # the target (and WAL) directories the run used
    token: str | None = None


def write_owner(
    directory: Path, *, directories: Iterable[Path] = (), token: str | None = None
) -> None:
    """Record this process as the owner of `directory`, a private directory it just made.
    Best effort: a directory without a record is left alone by cleanup, never removed."""
    doc = {
        "writer": liveness.this_process().document(),
        "directories": [str(Path(d).absolute()) for d in directories],
        "token": token,
    }
    with contextlib.suppress(OSError):
        (directory / OWNER).write_text(json.dumps(doc) + "\n")


def parse_owner(text: str) -> OwnerRecord | None:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    directories = doc.get("directories")
    token = doc.get("token")
    return OwnerRecord(
        liveness.Writer.from_document(doc.get("writer")),
        tuple(str(d) for d in directories) if isinstance(directories, list) else (),
        token if isinstance(token, str) else None,
    )


def read_owner(directory: Path) -> OwnerRecord | None:
    try:
        return parse_owner((directory / OWNER).read_text())
    except OSError:
        return None


def mark_kept(directory: Path) -> None:
    with contextlib.suppress(OSError):
        (directory / KEPT).write_text("kept with --keep: howfast cleanup leaves it alone\n")
