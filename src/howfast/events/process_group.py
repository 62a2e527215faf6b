"""An exec event's command and everything it started, as one process group to stop.

The command is started in a session of its own (`start_new_session=True`): its PID is its
process group's id and its session's, and what it starts (`sh -c "sleep 38 & ..."`) stays in
that group unless it makes a session of its own on purpose. Stopping the group reaches them
all: SIGTERM to the group, SIGKILL to what is left after a grace period.

The group's id is never signalled once it could name a stranger's group: the command (the
group's leader) is waited for without being collected (WNOWAIT), so that its PID, the
group's id, stays taken by its zombie until the group is stopped; only then is it collected.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

GRACE_S = 5.0  # SIGTERM, then SIGKILL to what is left
KILL_WAIT_S = 5.0  # after SIGKILL: only a process waiting in the kernel takes longer
POLL_S = 0.05
PROC = Path("/proc")


def group_members(pgid: int, proc: Path = PROC) -> list[int]:
    """The PIDs of the live processes in process group `pgid`; zombies are not counted (they
    have ended: their parent collects them, init for an orphan)."""
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] not in ("Z", "X") and fields[2] == str(pgid):
            found.append(int(entry.name))
    return sorted(found)


class ExecGroup:
    """The process group of one command started with start_new_session=True."""

    def __init__(self, leader: subprocess.Popen[bytes], proc: Path = PROC) -> None:
        self.leader = leader
        self.pgid = leader.pid
        self._proc = proc
        self._lock = threading.Lock()
        self._collected = False  # the leader collected: the id may name another group now
        self._status: int | None = None

    def wait_leader(
        self, timeout_s: float, given_up: Callable[[], bool] = lambda: False
    ) -> int | None:
        """The leader's exit status (-N: killed by signal N, as subprocess says), or None
        when it still ran after `timeout_s` or once `given_up()`. It is left uncollected (a
        zombie, which keeps the group's id ours)."""
        deadline = time.monotonic() + timeout_s
        while True:
            status = self.leader_status()
            if status is not None or given_up() or time.monotonic() >= deadline:
                return status
            time.sleep(POLL_S)

    def leader_status(self) -> int | None:
        if self._status is not None:
            return self._status
        with self._lock:
            if self._collected:
                return self.leader.returncode
            info = os.waitid(os.P_PID, self.pgid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
        if info is None or info.si_pid == 0:
            return None
        killed = info.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
        self._status = -info.si_status if killed else info.si_status
        return self._status

    def members(self) -> list[int]:
        return group_members(self.pgid, self._proc)

    def signal(self, sig: signal.Signals) -> bool:
        """`sig` to the group while its id is still ours; False when nothing was sent."""
        with self._lock:
            if self._collected:
                return False
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                return False
            return True

    def terminate(self) -> None:
        """Quick, for a cancel callback (Ctrl-C): SIGTERM to the group, without waiting;
        the event's thread then stops what is left (stop)."""
        self.signal(signal.SIGTERM)

    def stop(self, grace_s: float = GRACE_S) -> str | None:
        """Stop the whole group: SIGTERM, then SIGKILL after `grace_s` to what is left; then
        collect the leader. Returns the last signal sent ("SIGTERM", "SIGKILL"), None when
        nothing was left to stop."""
        sent = None
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, KILL_WAIT_S)):
            if not self.members() or not self.signal(sig):
                break
            sent = sig.name
            deadline = time.monotonic() + wait_s
            while self.members() and time.monotonic() < deadline:
                time.sleep(POLL_S)
        self.collect()
        return sent

    def collect(self) -> None:
        """Collect the leader (after the group is stopped or found empty)."""
        with self._lock:
            if self._collected:
                return
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.leader.wait(timeout=KILL_WAIT_S)
            self._collected = self.leader.returncode is not None
