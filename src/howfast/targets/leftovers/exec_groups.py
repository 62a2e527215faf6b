"""The process groups of exec events, recorded so that `howfast cleanup` stops what a killed
run's command left running (docs/events.md#an-exec-events-environment-and-process-group).

An exec event's command runs in a session and process group of its own, whose id is its PID.
While it runs, a record `.howfast-exec-group-PGID` beside its output, inside the run's
private work directory, holds that id, the command's start time and the boot; the record is
removed once the group is stopped. A howfast killed with SIGKILL leaves it: when cleanup
removes that private directory (its owner certainly gone), it first stops the recorded
groups' processes, each by its PID, after checking that it is still one of them:

- same boot; in the recorded process group *and* session (a setsid'd command's children
  stay in both);
- started no earlier than the command;
- when a process has the group's id as its PID, it is the command itself (same start time):
  another one there means the id was given again, to a stranger's group, and nothing is
  stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from howfast.store import liveness

PREFIX = ".howfast-exec-group-"
PROC = Path("/proc")
TERM_S = 5.0  # SIGTERM, then SIGKILL to what is left


@dataclass(frozen=True)
class GroupRecord:
    pgid: int
    start_ticks: int | None  # the command's start, in clock ticks since boot
    boot_id: str | None
    path: Path


@dataclass(frozen=True)
class ProcStat:
    pid: int
    state: str
    pgrp: int
    session: int
    start_ticks: int


def record_group(directory: Path, pgid: int, proc: Path = PROC) -> Path | None:
    """Record the group of a command just started (best effort: without a record a killed
    run's group is only not found by cleanup)."""
    path = directory / f"{PREFIX}{pgid}"
    doc = {
        "pgid": pgid,
        "start_ticks": liveness.process_start_ticks(pgid, proc),
        "boot_id": liveness.boot_id(),
    }
    try:
        path.write_text(json.dumps(doc) + "\n")
    except OSError:
        return None
    return path


def forget_group(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()


def parse_record(text: str, path: Path) -> GroupRecord | None:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("pgid"), int) or doc["pgid"] <= 1:
        return None
    ticks, boot = doc.get("start_ticks"), doc.get("boot_id")
    return GroupRecord(
        doc["pgid"],
        ticks if isinstance(ticks, int) else None,
        boot if isinstance(boot, str) else None,
        path,
    )


def recorded_groups(directory: Path) -> list[GroupRecord]:
    """The records under a private directory (in its steps' event directories)."""
    found = []
    for path in sorted(directory.rglob(f"{PREFIX}*")):
        with contextlib.suppress(OSError):
            record = parse_record(path.read_text(), path)
            if record is not None:
                found.append(record)
    return found


def parse_stat(pid: int, text: str) -> ProcStat:
    fields = text[text.rindex(")") + 2 :].split()
    return ProcStat(pid, fields[0], int(fields[2]), int(fields[3]), int(fields[19]))


def read_stats(proc: Path = PROC) -> list[ProcStat]:
    stats = []
    for entry in proc.iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stats.append(parse_stat(int(entry.name), (entry / "stat").read_text()))
    return stats


def members(record: GroupRecord, stats: list[ProcStat], boot_id: str | None) -> list[ProcStat]:
    """The live processes of the recorded group, as the rules above tell them; [] when the
    record is from another boot or the id names a stranger's group now."""
    if record.boot_id is None or record.boot_id != boot_id or record.start_ticks is None:
        return []
    leader = next((s for s in stats if s.pid == record.pgid), None)
    if leader is not None and leader.start_ticks != record.start_ticks:
        return []  # the id was given again
    return [
        s
        for s in stats
        if s.pgrp == record.pgid
        and s.session == record.pgid
        and s.start_ticks >= record.start_ticks
        and s.state not in ("Z", "X")
    ]


def stop_recorded_groups(directory: Path, proc: Path = PROC) -> list[int]:
    """Stop the recorded groups' processes under `directory` (SIGTERM, SIGKILL after TERM_S
    to what is left), each by its PID and start time; then forget the records. Returns the
    PIDs that were signalled."""
    signalled: list[int] = []
    boot = liveness.boot_id()
    for record in recorded_groups(directory):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            found = members(record, read_stats(proc), boot)
            if not found:
                break
            for member in found:
                if liveness.process_start_ticks(member.pid, proc) == member.start_ticks:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(member.pid, sig)
                    signalled.append(member.pid)
            deadline = time.monotonic() + TERM_S
            while members(record, read_stats(proc), boot) and time.monotonic() < deadline:
                time.sleep(0.1)
        forget_group(record.path)
    return sorted(set(signalled))
