"""One run at a time per target directory: an exclusive lock held for the run's life.

The lock is flock(2) on the directory itself, held by the howfast process: the kernel releases
it when that process ends, however it ends (SIGKILL included), and the servers and tools it
started do not hold it. Who holds it is written beside it, in `.howfast-lock` (PID, start
time, later the run id), so that a second howfast can say whose run is there instead of
suggesting to stop it. Targets of one process that share a directory (variants, a fleet) share
the lock.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from howfast.clock import now
from howfast.errors import UsageError

INFO = ".howfast-lock"
# The holder writes its INFO just after taking the lock: a run refused in between waits this
# long for it (a loaded machine's CI once refused a run with no PID to name).
HOLDER_WAIT_S = 2.0


@dataclass
class _Held:
    fd: int
    info: Path
    holders: int = 0
    doc: dict[str, object] = field(default_factory=dict)


_held: dict[tuple[int, int], _Held] = {}


def holder_text(doc: dict[str, object]) -> str:
    """`run 12 (PID 345) since 2025-...`, from what the holder wrote."""
    run = f"run {doc['run_id']}" if doc.get("run_id") is not None else "a howfast run"
    pid = f" (PID {doc['pid']})" if doc.get("pid") is not None else ""
    since = f" since {doc['since']}" if doc.get("since") else ""
    return f"{run}{pid}{since}"


def read_info(path: Path) -> dict[str, object]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


@dataclass
class DirectoryLock:
    """One target's share of the lock on a directory; release() once (idempotent)."""

    key: tuple[int, int]
    released: bool = False

    def note_run(self, run_id: int) -> None:
        held = _held.get(self.key)
        if held is None or self.released:
            return
        held.doc["run_id"] = run_id
        _write(held)

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        held = _held.get(self.key)
        if held is None:
            return
        held.holders -= 1
        if held.holders > 0:
            return
        del _held[self.key]
        with contextlib.suppress(OSError):
            held.info.unlink()
        os.close(held.fd)  # releases the flock


def _write(held: _Held) -> None:
    with contextlib.suppress(OSError):  # the lock itself is what counts
        held.info.write_text(json.dumps(held.doc) + "\n")


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def _holder(info: Path) -> dict[str, object]:
    """What the holder wrote, once it names a live process, or what is there after
    HOLDER_WAIT_S: a holder that just took the lock writes it a moment later (a half-written
    file reads as nothing), and a file a SIGKILLed run left names a process that is gone
    until the new holder replaces it."""
    deadline = time.monotonic() + HOLDER_WAIT_S
    while True:
        doc = read_info(info)
        if _alive(doc.get("pid")) or time.monotonic() >= deadline:
            return doc
        time.sleep(0.05)


def lock_directory(directory: Path, role: str) -> DirectoryLock:
    """Take the directory for this run; UsageError naming the run that holds it."""
    st = directory.stat()
    key = (st.st_dev, st.st_ino)
    held = _held.get(key)
    if held is None:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = _holder(directory / INFO)
            raise UsageError(
                f"{role} {directory} is in use by {holder_text(holder)}: two runs on one "
                "directory would measure each other",
                "wait until that run ends, or give another directory",
            ) from None
        except OSError:  # a filesystem without flock (some network filesystems): unlocked
            os.close(fd)
            return DirectoryLock(key, released=True)
        doc: dict[str, object] = {"pid": os.getpid(), "since": now(), "run_id": None}
        held = _Held(fd, directory / INFO, doc=doc)
        _held[key] = held
        _write(held)
    held.holders += 1
    return DirectoryLock(key)


@atexit.register
def _remove_info_files() -> None:
    """A process that exits holding locks (refused after checking) leaves no file behind."""
    for held in list(_held.values()):
        with contextlib.suppress(OSError):
            held.info.unlink()
