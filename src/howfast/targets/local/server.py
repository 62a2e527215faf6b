"""The server part of a local target: the primary's lifecycle (initdb, its postgresql.conf,
start, stop, the tidying after a crash) as its OS user, in its cgroups."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from howfast.errors import HowfastError, UsageError
from howfast.machine.pgbin import PgInstall
from howfast.targets.base import Connection
from howfast.targets.leftovers import registry
from howfast.targets.leftovers.killed import free_killed_memory
from howfast.targets.local.cgroups import ServerCgroups
from howfast.targets.local.client import ClientAccess
from howfast.targets.local.dirs import ClusterDirs
from howfast.targets.local.options import SUPERUSER
from howfast.targets.local_server import conf_line, free_port, listen_ips, processes_in
from howfast.targets.osuser import OsUser

START_TIMEOUT_S = 60
START_LOG_LINES = 10  # of the server log, in the message of a start that failed
STOP_TIMEOUT_S = 60


def start_failure(what: str, log_tail: str | None) -> str:
    """Why a server did not start, with the server log's last lines, which say why."""
    if not log_tail or not log_tail.strip():
        return f"{what}; the server log is empty"
    return f"{what}; the server log's last lines:\n{log_tail}"


def base_settings(port: int, socket_dir: Path) -> dict[str, str]:
    return {
        "port": str(port),
        "listen_addresses": "",  # unix socket only: nothing reachable from the network
        "unix_socket_directories": str(socket_dir),
        "log_checkpoints": "on",
        "log_line_prefix": "%m [%p] ",
        "log_timezone": "UTC",  # exact times for the checkpoint events read from the log
        "logging_collector": "off",
    }


class PrimaryServer:
    """The primary: made with initdb in `dirs`, started in `cgroups`, reached by `client`."""

    def __init__(
        self,
        install: PgInstall,
        dirs: ClusterDirs,
        cgroups: ServerCgroups,
        client: ClientAccess,
        *,
        checksums: bool,
        keep: bool,
    ) -> None:
        self.install = install
        self.dirs = dirs
        self.cgroups = cgroups
        self.client = client
        self.checksums = checksums
        self.keep = keep
        self.user: OsUser | None = None
        self.postmaster: subprocess.Popen[bytes] | None = None
        self.connection: Connection | None = None
        self.port = 0  # set by start(): the port the server listens on
        self.server_log: Path | None = None

    def start(
        self, settings: Mapping[str, str], hba_first: str = ""
    ) -> tuple[Connection, list[str]]:
        """initdb, `settings` over howfast's in postgresql.conf, `hba_first` before initdb's
        lines of pg_hba.conf, the cgroups, the server; its connection and warnings."""
        self._initdb()
        if hba_first:
            hba = self.dirs.data_dir / "pg_hba.conf"
            hba.write_text(hba_first + hba.read_text())  # its owner and mode kept
        assert self.dirs.run_dir is not None
        # The user's --set wins over howfast's replication settings, on purpose.
        in_force = {
            **base_settings(0, self.dirs.run_dir),
            **self.client.listen_settings(),
            **settings,
        }
        if "port" not in settings:  # free on every address the server listens on
            in_force["port"] = str(free_port(listen_ips(in_force["listen_addresses"])))
        # The port in force: the plan or --set may have chosen one over the free one.
        try:
            self.port = int(in_force["port"])
        except ValueError:
            raise UsageError(f"port = {in_force['port']!r} is not a port number") from None
        with (self.dirs.data_dir / "postgresql.conf").open("a") as conf:
            conf.write("\n# set by howfast\n")
            for name, value in in_force.items():
                conf.write(conf_line(name, value))
        self.server_log = self.dirs.run_dir / "server.log"
        warning = self.cgroups.create(self.dirs.data_dir, self.dirs.disks())
        self.start_postmaster()
        self.connection = Connection(
            host=str(self.dirs.run_dir), port=self.port, user=SUPERUSER, dbname="postgres"
        )
        return self.connection, [warning] if warning else []

    def _initdb(self) -> None:
        """initdb; with --client tcp the password file lives in the private run directory
        only while initdb reads it."""
        pwfile = self.client.password_file(self.dirs.run_dir)
        if self.client.password is None or pwfile is None:
            self._run_checked(self.initdb_argv(), "initdb")
            return
        try:
            assert self.user is not None
            self.client.write_password(pwfile, self.user)
            self._run_checked(self.initdb_argv(), "initdb")
        finally:
            pwfile.unlink(missing_ok=True)

    def initdb_argv(self) -> list[str]:
        argv = [
            str(self.install.program("initdb") or "initdb"),
            "-D",
            str(self.dirs.data_dir),
            "-U",
            SUPERUSER,
            *self.client.auth_argv(self.dirs.run_dir),
            "--encoding=UTF8",
            "--locale=C",
        ]
        if self.checksums:
            argv.append("--data-checksums")
        if self.dirs.wal_cluster_dir:
            argv.append(f"--waldir={self.dirs.wal_cluster_dir / 'pg_wal'}")
        return argv

    def postgres_argv(self) -> list[str]:
        return [str(self.install.program("postgres") or "postgres"), "-D", str(self.dirs.data_dir)]

    def _as_server_user(self) -> dict[str, object]:
        assert self.user is not None
        return dict(self.user.subprocess_kwargs())

    def _run_checked(self, argv: list[str], what: str) -> None:
        out = subprocess.run(
            argv, capture_output=True, text=True, check=False, **self._as_server_user()
        )  # type: ignore[call-overload]
        if out.returncode != 0:
            tail = "\n".join((out.stderr or out.stdout).strip().splitlines()[-5:])
            raise HowfastError(f"{what} failed (exit {out.returncode}): {tail}")

    def _launch_postmaster(self) -> None:
        assert self.server_log is not None and self.dirs.run_dir is not None
        with self.server_log.open("ab") as log:
            if self.user and self.user.uid != os.geteuid():
                os.chown(self.server_log, self.user.uid, self.user.gid)

            def launch() -> subprocess.Popen[bytes]:
                return subprocess.Popen(  # type: ignore[call-overload,no-any-return]
                    self.postgres_argv(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # Ctrl-C reaches howfast, which stops the server
                    **self._as_server_user(),
                )

            self.postmaster = self.cgroups.spawn(launch)

    def start_postmaster(self, *, listening_is_enough: bool = False) -> None:
        """Start the server and wait until it accepts connections (or, when
        `listening_is_enough`, until it answers at all, even "starting up")."""
        self._launch_postmaster()
        enough = (0, 1) if listening_is_enough else (0,)
        deadline = time.monotonic() + START_TIMEOUT_S
        pg_isready = self.install.program("pg_isready")
        while time.monotonic() < deadline:
            assert self.postmaster is not None
            if self.postmaster.poll() is not None:
                raise HowfastError(
                    start_failure(
                        f"PostgreSQL exited during start-up (exit {self.postmaster.returncode})",
                        self.log_tail(START_LOG_LINES),
                    )
                )
            if pg_isready and self._isready(pg_isready) in enough:
                # what a kill of this server would leave, for howfast cleanup
                registry.own_server_memory(self.postmaster.pid, self.dirs.data_dir)
                return
            time.sleep(0.1)
        raise HowfastError(
            start_failure(
                f"PostgreSQL did not become ready within {START_TIMEOUT_S} s (it was still "
                "starting up)",
                self.log_tail(START_LOG_LINES),
            )
        )

    def _isready(self, pg_isready: Path) -> int:
        """pg_isready's status: 0 accepting, 1 rejecting (starting up), 2 no response."""
        # -d postgres: without it the probe asks for a database named after the user, and the
        # server logs a FATAL "database does not exist" for every probe (and every log tail)
        where = ["-h", str(self.dirs.run_dir), "-p", str(self.port), "-U", SUPERUSER]
        out = subprocess.run(
            [str(pg_isready), "-q", *where, "-d", "postgres"],
            capture_output=True,
            check=False,
        )
        return out.returncode

    def log_tail(self, lines: int) -> str | None:
        if not self.server_log or not self.server_log.exists():
            return None
        return "\n".join(self.server_log.read_text(errors="replace").splitlines()[-lines:])

    def pid(self) -> int | None:
        """The postmaster's, while it runs."""
        proc = self.postmaster
        return proc.pid if proc is not None and proc.poll() is None else None

    def stop(self) -> None:
        """Stopped, tidied after a crash, out of its cgroups; then kept or removed. Then a
        HowfastError when some of a crashed server's shared memory is left (`howfast
        cleanup` removes it)."""
        left = None
        try:
            crashed = self.postmaster is not None and self.postmaster.poll() is not None
            self.stop_postmaster()
            if crashed and not self.keep:  # a kept cluster's next start tidies up itself
                left = self._tidy_after_crash()
        finally:
            # Stopped: a second stop() must not take it for a crashed server to tidy.
            self.postmaster = None
            self.cgroups.remove()
        if self.keep and self.dirs.cluster_dir.exists():
            self.dirs.keep(self.server_log)
            return
        self.dirs.remove()
        if left is not None:
            raise HowfastError(left)

    def stop_postmaster(self, first: signal.Signals | None = None) -> None:
        proc = self.postmaster
        if proc is None:
            return
        if proc.poll() is not None:
            self._wait_children_gone()  # it died: its backends may still be exiting
            return
        # Fast shutdown (SIGINT) when the cluster is kept or restarted, so it starts again
        # cleanly; immediate (SIGQUIT) when it is about to be deleted anyway. Then SIGKILL.
        if first is None:
            first = signal.SIGINT if self.keep else signal.SIGQUIT
        for sig, wait_s in ((first, STOP_TIMEOUT_S), (signal.SIGKILL, 10)):
            try:
                proc.send_signal(sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        self._wait_children_gone()

    def _wait_children_gone(self) -> None:
        """Backends exit soon after the postmaster (they notice its death). Wait for every
        process working in our data directory, and kill the ones that linger, so deleting
        the directory races with nothing. These are all processes our postmaster started."""
        deadline = time.monotonic() + 10
        while processes_in(self.dirs.data_dir) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in processes_in(self.dirs.data_dir):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def _tidy_after_crash(self) -> str | None:
        """A server that died without shutting down (killed, OOM) leaves its shared memory
        behind: a System V segment and /dev/shm/PostgreSQL.* files. A postmaster starting on
        the same data directory removes those it finds at its data directory's key, so start
        it once, then stop it; then what howfast recorded of the dead server's that is still
        there (leftovers/killed.py). None, or a warning saying what is left."""
        try:
            self.start_postmaster(listening_is_enough=True)
        except HowfastError:
            pass  # it could not start (the cause of the crash?); the record is still read
        finally:
            self.stop_postmaster(signal.SIGQUIT)
        return free_killed_memory(self.dirs.data_dir)
