"""A failover on this machine (issue 29, docs/events.md): the primary dies like a failed node
(SIGKILL of its postmaster and of every process in its data directory at once; stopped first
while the `failover` event cuts the standby's link, since a killed process's kernel still
delivers what it had written and a dead node's does not), then, once the standby has written
what reached it, a standby is promoted with `pg_ctl promote -w`, as the server's OS
user. The old primary is never started again as a server (no split brain): between steps its
shared memory is freed by a postmaster started once on its data directory, on a port and socket
nobody else knows and stopped as soon as it listens (`tidy_killed`; what it did not find of
the killed server's, howfast removes from its registry's record), then its directory is
removed and the design rebuilt from the promoted server (LocalTarget.restore_design).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from howfast.errors import HowfastError
from howfast.machine.pgbin import PgInstall
from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.leftovers.killed import free_killed_memory
from howfast.targets.local_server import free_port, processes_in
from howfast.targets.osuser import OsUser
from howfast.targets.replicas.local import LocalStandby

PROMOTE_TIMEOUT_S = 60
TIDY_TIMEOUT_S = 60
GONE_TIMEOUT_S = 10
# The promoted server has no standby: a commit must not wait for one.
ASYNC_SQL = ("ALTER SYSTEM SET synchronous_standby_names = ''", "SELECT pg_reload_conf()")
WRITTEN_SQL = "SELECT written_lsn::text FROM pg_stat_wal_receiver"
DRAIN_TIMEOUT_S = 2.0
STABLE_S = 0.1
DRAIN_POLL_S = 0.02
TIMELINE_SQL = "SELECT pg_is_in_recovery(), substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)"


def kill_all(
    postmaster: subprocess.Popen[bytes],
    data_dir: Path,
    at_stop: Callable[[], None] | None = None,
) -> None:
    """SIGKILL the postmaster and every process working in its data directory, then wait
    until they are all gone. With `at_stop` (the node's network cut), every one of them is
    first stopped (SIGSTOP: no more commit acknowledged, no more WAL sent), then `at_stop`
    runs, then they are killed: nothing they had not sent before the stop reaches anyone,
    and no commit is acknowledged between the cut and the kill. Stopped processes are
    killed even when `at_stop` fails."""
    if at_stop is not None:
        for pid in [postmaster.pid, *processes_in(data_dir)]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        try:
            at_stop()
        finally:
            _kill(postmaster, data_dir)
        return
    _kill(postmaster, data_dir)


def _kill(postmaster: subprocess.Popen[bytes], data_dir: Path) -> None:
    for pid in [postmaster.pid, *processes_in(data_dir)]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        postmaster.wait(timeout=GONE_TIMEOUT_S)
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while processes_in(data_dir) and time.monotonic() < deadline:
        for pid in processes_in(data_dir):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def wait_received(standby: LocalStandby) -> float:
    """Until the standby's walreceiver has written all it will get (its written position
    unchanged over STABLE_S, or no walreceiver any more), at most DRAIN_TIMEOUT_S; the seconds
    waited. A standby whose primary died keeps reading what its kernel had received (a real
    failover promotes it seconds later): promoted at once, its walreceiver would be stopped
    with that WAL unread, which a failed node does not take from it."""
    import psycopg  # here: as pgquery, the driver only when a failover runs

    began = time.monotonic()
    if standby.connection is None:
        return 0.0
    last: object = "none yet"
    stable_since = began
    with (
        contextlib.suppress(HowfastError, OSError, psycopg.Error),
        pgquery.connect(standby.connection, timeout_s=5) as db,
    ):
        while time.monotonic() - began < DRAIN_TIMEOUT_S:
            row = db.execute(WRITTEN_SQL).fetchone()
            now = time.monotonic()
            written = row[0] if row is not None else None
            if written is None:  # no walreceiver: it took what it got and ended
                break
            if written != last:
                last, stable_since = written, now
            elif now - stable_since >= STABLE_S:
                break
            time.sleep(DRAIN_POLL_S)
    return round(time.monotonic() - began, 3)


def promote(standby: LocalStandby) -> Connection:
    """`pg_ctl promote -w` as the server's OS user; back once the standby accepts writes,
    with no synchronous standby to wait for. HowfastError with pg_ctl's words otherwise."""
    if standby.connection is None or not standby.alive():
        raise HowfastError(f"{standby.name} is not running: it cannot be promoted")
    program = str(standby.install.program("pg_ctl") or "pg_ctl")
    argv = [program, "promote", "-w", "-t", str(PROMOTE_TIMEOUT_S), "-D", str(standby.data_dir)]
    out = subprocess.run(  # type: ignore[call-overload]
        argv,
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        timeout=PROMOTE_TIMEOUT_S + 10,
        **standby.user.subprocess_kwargs(),
    )
    if out.returncode != 0:
        said = (out.stderr or out.stdout).strip().splitlines()[-1:]
        raise HowfastError(
            f"promoting {standby.name} failed (pg_ctl exit {out.returncode}): "
            f"{said[0] if said else 'no output'}"
        )
    with pgquery.connect(standby.connection, timeout_s=10) as db:
        for statement in ASYNC_SQL:
            db.execute(statement)
    return standby.connection


def primary_state(conn: Connection) -> tuple[bool, int]:
    """(in recovery, timeline of the WAL written now) of the server at `conn`."""
    with pgquery.connect(conn, timeout_s=10) as db:
        row = db.execute(TIMELINE_SQL).fetchone()
    assert row is not None
    return bool(row[0]), int(str(row[1]), 16)


def tidy_killed(
    install: PgInstall, user: OsUser, data_dir: Path, socket_dir: Path, log: Path
) -> str | None:
    """Free the shared memory a killed server left (a System V segment, /dev/shm/PostgreSQL.*
    files): a postmaster starting on its data directory removes those it finds at its data
    directory's key. It starts on a free port, its socket in howfast's private directory: no
    client knows it (the old primary never serves again), and it is stopped (SIGQUIT) as soon
    as it listens, also on Ctrl-C. Once it is gone, what howfast recorded of the killed
    server's own that is still there (a segment it made at another key) is removed
    (leftovers/killed.py). None, or a warning saying what is left and why."""
    working = processes_in(data_dir)
    if working:  # not a killed server's: nothing of it is touched
        return (
            f"the shared memory of the killed server on {data_dir} is left: processes still "
            f"work there (PIDs {', '.join(map(str, working))}); `howfast cleanup` removes it"
        )
    if data_dir.is_dir():
        _start_and_stop(install, user, data_dir, socket_dir, log)
    return free_killed_memory(data_dir)


def _start_and_stop(
    install: PgInstall, user: OsUser, data_dir: Path, socket_dir: Path, log: Path
) -> None:
    """A postmaster on `data_dir`, stopped as soon as it listens; back once no process is
    left in the data directory."""
    port = free_port()
    argv = [str(install.program("postgres") or "postgres"), "-D", str(data_dir),
            "-p", str(port), "-k", str(socket_dir), "-c", "listen_addresses="]  # fmt: skip
    pg_isready = install.program("pg_isready")
    with log.open("ab") as out:
        proc = subprocess.Popen(  # type: ignore[call-overload]
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **user.subprocess_kwargs(),
        )
    try:
        deadline = time.monotonic() + TIDY_TIMEOUT_S
        while proc.poll() is None and pg_isready is not None and time.monotonic() < deadline:
            where = ["-h", str(socket_dir), "-p", str(port), "-d", "postgres"]
            if subprocess.run([str(pg_isready), "-q", *where], check=False).returncode in (0, 1):
                break
            time.sleep(0.05)
    finally:
        for sig in (signal.SIGQUIT, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
            try:
                proc.wait(timeout=GONE_TIMEOUT_S)
                break
            except subprocess.TimeoutExpired:
                continue
        deadline = time.monotonic() + GONE_TIMEOUT_S
        while processes_in(data_dir) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in processes_in(data_dir):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
