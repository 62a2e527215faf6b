"""Is the process that writes a `running` run still there?

A run killed with SIGKILL (or by the OOM killer, or a power cut) cannot mark itself aborted.
Each run records its writer: host name, kernel boot id, PID namespace, PID and the PID's start
time. A later howfast on the same host and in the same PID namespace can then tell for certain
that the writer is gone: another boot, no such PID, or a PID that a newer process reuses (a
different start time). On another host, or in another container sharing the store, it cannot
tell, and leaves the run alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from howfast.model import JSONValue
from howfast.store.base import Store

PROC = Path("/proc")
BOOT_ID = PROC / "sys/kernel/random/boot_id"


@dataclass(frozen=True)
class Writer:
    host: str
    boot_id: str | None
    pid: int
    start_ticks: int | None  # field 22 of /proc/PID/stat: clock ticks after boot
    pid_ns: str | None = None  # e.g. "pid:[4026531836]": PIDs mean something only inside it

    def document(self) -> dict[str, JSONValue]:
        return {
            "host": self.host,
            "boot_id": self.boot_id,
            "pid": self.pid,
            "start_ticks": self.start_ticks,
            "pid_ns": self.pid_ns,
        }

    @classmethod
    def from_document(cls, doc: object) -> Writer | None:
        if not isinstance(doc, dict):
            return None
        host, pid = doc.get("host"), doc.get("pid")
        if not isinstance(host, str) or not isinstance(pid, int):
            return None
        boot_id, ticks, pid_ns = doc.get("boot_id"), doc.get("start_ticks"), doc.get("pid_ns")
        return cls(
            host,
            boot_id if isinstance(boot_id, str) else None,
            pid,
            ticks if isinstance(ticks, int) else None,
            pid_ns if isinstance(pid_ns, str) else None,
        )


def start_ticks_from_stat(stat: str) -> int:
    """The start time in a /proc/PID/stat line. The command name (field 2) may hold spaces
    and parentheses, so count fields after its last ')': state is field 3, starttime 22."""
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def process_start_ticks(pid: int, proc: Path = PROC) -> int | None:
    try:
        return start_ticks_from_stat((proc / str(pid) / "stat").read_text())
    except (OSError, ValueError, IndexError):
        return None


def boot_id(path: Path = BOOT_ID) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def pid_namespace(proc: Path = PROC) -> str | None:
    try:
        return os.readlink(proc / "self/ns/pid")
    except OSError:
        return None


def this_process() -> Writer:
    import socket  # here: every command that opens a store imports this module

    pid = os.getpid()
    return Writer(socket.gethostname(), boot_id(), pid, process_start_ticks(pid), pid_namespace())


def pid_exists(pid: int) -> bool:
    """Whether any process has this PID; by signal 0, which also sees processes that a
    hidepid /proc mount hides from other users."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def process_state(pid: int, proc: Path = PROC) -> str | None:
    """Field 3 of /proc/PID/stat (R, S, D, Z...); None when there is no such process."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()[0]


def is_zombie(pid: int, proc: Path = PROC) -> bool:
    """A process that has ended and waits for its parent to collect it: gone, though its PID
    and start time still show (its parent may never collect it: a killed shell's child)."""
    return process_state(pid, proc) in ("Z", "X")


def is_gone(writer: Writer, here: Writer, proc: Path = PROC) -> bool:
    """True only when `writer` certainly no longer runs; `here` is this process's Writer."""
    if writer.host != here.host or writer.pid_ns != here.pid_ns:
        return False  # another machine's or container's processes are out of sight
    if writer.boot_id is None or here.boot_id is None:
        return False  # without boot ids a PID could be from another boot: cannot tell
    if writer.boot_id != here.boot_id:
        return True  # the machine rebooted since
    if not pid_exists(writer.pid):
        return True
    ticks = process_start_ticks(writer.pid, proc)
    # The PID now belongs to a process started at another time: the writer is gone.
    return None not in (ticks, writer.start_ticks) and ticks != writer.start_ticks


@dataclass(frozen=True)
class AbandonedRun:
    run_id: int
    writer: Writer


def close_abandoned_runs(store: Store, here: Writer | None = None) -> list[AbandonedRun]:
    """Mark aborted every `running` run whose writer is certainly gone; their stored steps
    stay. Runs without a writer (stored before schema v3) are left alone."""
    here = here or this_process()
    closed = []
    for run_id, document in store.running_runs():
        writer = Writer.from_document(document)
        if writer is not None and is_gone(writer, here) and store.abandon_run(run_id):
            closed.append(AbandonedRun(run_id, writer))
    return closed


@dataclass(frozen=True)
class StillRunning:
    """Why a `running` run must be left alone. `unknown`: its writer cannot be seen from
    here (another host or container, or none recorded), as opposed to alive on this machine."""

    reason: str
    unknown: bool

    def __str__(self) -> str:
        return self.reason


def still_running(store: Store, run_id: int, here: Writer | None = None) -> StillRunning | None:
    """Why run `run_id` must be left alone: its status is `running` and its writer is not
    certainly gone (alive here, or on another host or container where it cannot be told);
    None when nothing writes it any more."""
    here = here or this_process()
    for running_id, document in store.running_runs():
        if running_id != run_id:
            continue
        writer = Writer.from_document(document)
        if writer is None:
            return StillRunning(
                f"run {run_id} is marked running and does not say which process writes it",
                unknown=True,
            )
        if is_gone(writer, here):
            return None
        if writer.host != here.host or writer.pid_ns != here.pid_ns:
            return StillRunning(
                f"run {run_id} is running on {writer.host} (PID {writer.pid}), where this "
                "howfast cannot tell whether it still does",
                unknown=True,
            )
        if writer.boot_id is None or here.boot_id is None:
            return StillRunning(
                f"run {run_id} is marked running by PID {writer.pid}, and without the "
                "machine's boot id this howfast cannot tell whether that process is its writer",
                unknown=True,
            )
        return StillRunning(f"run {run_id} is still running (howfast PID {writer.pid})", False)
    return None
