"""A standby on this machine: a base backup of a local primary (over its Unix socket: initdb's
pg_hba trusts local replication connections), started as a hot standby that streams from it
over TCP on a loopback address of its own (standby_1: 127.0.0.2, `ReplicationAccess`), as
the replication role with a password in a passfile of the private run directory. Its own
connection, distinct from the load's, is what a `partition` event cuts.

Its data directory is on the storage under test: inside the primary's cluster directory by
default (removed with it), or in a directory of its own under `--standby-dir`. Its socket and
log go to the primary's private run directory, its port is free on loopback (it listens on
the design's replication addresses only, to be reached once promoted). It runs as the
server's OS user, never root, in its own session (a terminal's Ctrl-C reaches howfast, which
stops it by PID) and in an I/O accounting cgroup of its own, so its writes can be told from
the primary's.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from howfast.errors import HowfastError
from howfast.hosts.base import Host
from howfast.hosts.local import LocalHost
from howfast.machine.cgroup import IoCgroup
from howfast.machine.fsinfo import describe_path, whole_disk_number
from howfast.machine.pgbin import PgInstall
from howfast.machine.serverio import IoAccount, ServerIo, open_accounting
from howfast.model import JSONValue
from howfast.targets import pgquery
from howfast.targets.base import Connection, PlannedConnection
from howfast.targets.leftovers import registry
from howfast.targets.local_server import conf_line, free_port, processes_in
from howfast.targets.osuser import OsUser
from howfast.targets.replicas.builders import (
    REPLICATION_ROLE,
    basebackup_argv,
    pgpass_line,
    standby_conf,
)

START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 10
LOG_LINES = 10
CONNECT_TIMEOUT_S = 5


def stop_group(proc: subprocess.Popen[str], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGKILL to the process group `proc` leads (it was started in a session of its own, so
    the group is its own and its children's), then wait until every one of them is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=timeout_s)  # reading on: a full pipe would hold it
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)  # a member left (its orphans are reaped by init)
        except ProcessLookupError:
            return
        except PermissionError:
            pass
        time.sleep(0.05)


@dataclass(frozen=True)
class ReplicationAccess:
    """How a standby reaches its primary over TCP: `address` (its own), as the replication
    role with `password`; `listen` the addresses every server of the design listens on."""

    address: str
    listen: tuple[str, ...]
    password: str = field(repr=False)
    receiver_timeout: str = "60s"  # wal_receiver_timeout

    def primary(self, primary: Connection) -> Connection:
        """The primary as the standby reaches it: on its own address, as the role."""
        # connect_timeout: a walreceiver that reconnects while its packets are dropped (a
        # partition) gives up after 5 s and tries again, instead of waiting out the
        # kernel's SYN retries (about two minutes)
        return replace(
            primary,
            host=self.address,
            user=REPLICATION_ROLE,
            password=None,
            options={"connect_timeout": str(CONNECT_TIMEOUT_S)},
        )

    def write_passfile(self, path: Path, port: int, user: OsUser) -> Path:
        """The role's password, for libpq (0600, the server's user's), at `path` in the
        private run directory: removed with it."""
        path.unlink(missing_ok=True)  # a rebuilt standby writes it again
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(pgpass_line(self.address, port, self.password))
        if user.uid != os.geteuid():
            os.chown(path, user.uid, user.gid)
        return path


class StandbyStorage(Protocol):
    """Storage of its own for a standby (an emulated volume with added latency, emulating a
    remote node's disk: targets/emulated/standby_volume.py), built before its base backup."""

    @property
    def mount_dir(self) -> Path: ...

    def check(self) -> None: ...

    def build(self) -> None: ...

    def undelay(self) -> None:
        """Nothing waits out a delay any more (it is being taken down)."""

    def set_latency(self, ms: float) -> None:
        """The latency every I/O waits from now on (a promoted standby's volume takes the
        primary's: docs/events.md, after a failover)."""

    def teardown(self) -> None: ...

    def record(self) -> dict[str, JSONValue]: ...


class LocalStandby:
    """One standby of a LocalTarget (it satisfies capabilities.StandbyMember)."""

    def __init__(
        self,
        name: str,
        install: PgInstall,
        user: OsUser,
        root: Path,
        run_dir: Path,
        *,
        cgroup_name: str | None = None,
        io_cgroup: IoCgroup | None = None,
        storage: StandbyStorage | None = None,
        replication: ReplicationAccess | None = None,
    ) -> None:
        self.name = name
        self.replication = replication
        self.install = install
        self.user = user
        self.storage = storage
        # made by build(), removed by stop(); on its own storage, a directory of its mount
        self.root = storage.mount_dir / name if storage is not None else root
        self.data_dir = self.root / "data"
        self.run_dir = run_dir
        self.log = run_dir / f"{name}.log"
        self.port = 0
        self.postmaster: subprocess.Popen[bytes] | None = None
        self.connection: Connection | None = None
        # An I/O cgroup given by whoever built its storage (an emulated volume), else one of
        # its own for accounting, made at start and removed at stop.
        self.io_cgroup = io_cgroup
        self.cgroup_name = cgroup_name or f"howfast-io-{root.name}"
        self.io_account: IoAccount | None = None
        self.io_account_note: str | None = None
        self._accounting: IoCgroup | None = None
        self._made_root = False
        self._storage_built = False
        self.version: str | None = None

    # -- what --dry-run shows ---------------------------------------------------------------
    def planned(self, primary: Connection) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return (
            (
                f"{self.name}: base backup from the primary, as the server's OS user",
                tuple(self._basebackup_argv(primary)),
            ),
            (f"{self.name}: the standby server, in its own session", tuple(self._postgres_argv())),
        )

    def _basebackup_argv(self, primary: Connection) -> list[str]:
        program = str(self.install.program("pg_basebackup") or "pg_basebackup")
        argv = basebackup_argv(program, primary, self.data_dir, self.name)
        if isinstance(primary, PlannedConnection):  # the port is chosen at start
            argv[argv.index("-p") + 1] = primary.port_text
        return argv

    def _postgres_argv(self) -> list[str]:
        return [str(self.install.program("postgres") or "postgres"), "-D", str(self.data_dir)]

    def _as_server_user(self) -> dict[str, object]:
        return dict(self.user.subprocess_kwargs())

    # -- lifecycle --------------------------------------------------------------------------
    def build(self, primary: Connection) -> None:
        """Its data directory by base backup from the primary, then the standby's settings."""
        if self.storage is not None:
            self._storage_built = True  # stop() takes down what build() began
            self.storage.build()
        registry.own_directory(self.root, "standby")  # before it exists, for howfast cleanup
        self.root.mkdir(mode=0o700)
        self._made_root = True
        if self.user.uid != os.geteuid():
            os.chown(self.root, self.user.uid, self.user.gid)
        out = self._base_backup(primary)
        if out.returncode != 0:
            said = "\n".join((out.stderr or out.stdout).strip().splitlines()[-5:])
            raise HowfastError(
                f"{self.name}: the base backup from the primary failed (exit "
                f"{out.returncode}): {said or 'no output'}"
            )
        self.port = free_port(self.replication.listen if self.replication else ())
        syncfs = self.install.major >= 14
        if self.replication is None:
            conf = standby_conf(self.name, self.port, str(self.run_dir), primary, syncfs=syncfs)
        else:
            conf = standby_conf(
                self.name,
                self.port,
                str(self.run_dir),
                self.replication.primary(primary),
                passfile=str(
                    self.replication.write_passfile(
                        self.run_dir / f"{self.name}.pgpass", primary.port, self.user
                    )
                ),
                listen_addresses=",".join(self.replication.listen),
                syncfs=syncfs,
            )
            conf["wal_receiver_timeout"] = self.replication.receiver_timeout
        with (self.data_dir / "postgresql.auto.conf").open("a") as auto:
            auto.write("\n# set by howfast: this copy runs as a standby\n")
            for key, value in conf.items():
                auto.write(conf_line(key, value))
        signal_file = self.data_dir / "standby.signal"
        signal_file.touch()
        if self.user.uid != os.geteuid():
            os.chown(signal_file, self.user.uid, self.user.gid)

    def _base_backup(self, primary: Connection) -> subprocess.CompletedProcess[str]:
        """pg_basebackup, in a session of its own. In the main thread: a Ctrl-C raises there,
        and then its whole process group is killed and waited for. pg_basebackup streams the
        WAL from a child it forks (-X stream); killed alone, the parent leaves that child
        writing into the standby's directory until its next status message (10 s), which
        made the unmount of a standby's volume fail ("target is busy")."""
        proc = subprocess.Popen(  # type: ignore[call-overload]
            self._basebackup_argv(primary),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            **self._as_server_user(),
        )
        try:
            stdout, stderr = proc.communicate()
        except BaseException:
            if self.storage is not None:  # nothing of it waits out a delay while it goes
                self.storage.undelay()
            stop_group(proc)
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)

    def start(self) -> Connection:
        """Start the standby; back once it accepts (read-only) connections."""
        self._open_io_accounting()
        with self.log.open("ab") as log:
            if self.user.uid != os.geteuid():
                os.chown(self.log, self.user.uid, self.user.gid)

            def launch() -> subprocess.Popen[bytes]:
                return subprocess.Popen(  # type: ignore[call-overload,no-any-return]
                    self._postgres_argv(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # Ctrl-C reaches howfast, which stops it
                    **self._as_server_user(),
                )

            start = launch
            if self.io_cgroup is not None:
                start = functools.partial(self.io_cgroup.spawn, launch)
            self.postmaster = start()
        self._wait_ready()
        self.connection = Connection(
            host=str(self.run_dir), port=self.port, user="howfast", dbname="postgres"
        )
        with contextlib.suppress(HowfastError):
            self.version, _ = pgquery.server_facts(self.connection)
        return self.connection

    def _open_io_accounting(self) -> None:
        disks = [d for d in [whole_disk_number(self.data_dir)] if d is not None]
        found = open_accounting(self.cgroup_name, None, self.io_cgroup, disks)
        self.io_account, self.io_account_note = found.account, found.warning
        if found.created is not None:
            self._accounting = self.io_cgroup = found.created
            registry.own_cgroup(found.created.path, self.data_dir)

    def _wait_ready(self) -> None:
        pg_isready = self.install.program("pg_isready")
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.postmaster is not None
            if self.postmaster.poll() is not None:
                raise HowfastError(
                    f"{self.name} exited during start-up (exit {self.postmaster.returncode}); "
                    f"its server log's last lines:\n{self.log_tail(LOG_LINES) or '(empty)'}"
                )
            where = ["-h", str(self.run_dir), "-p", str(self.port), "-d", "postgres"]
            if pg_isready is None:
                return
            ready = subprocess.run([str(pg_isready), "-q", *where], check=False)
            if ready.returncode == 0:
                registry.own_server_memory(self.postmaster.pid, self.data_dir)
                return
            time.sleep(0.1)
        raise HowfastError(
            f"{self.name} did not accept connections within {START_TIMEOUT_S} s; its server "
            f"log's last lines:\n{self.log_tail(LOG_LINES) or '(empty)'}"
        )

    def alive(self) -> bool:
        return self.postmaster is not None and self.postmaster.poll() is None

    def stop(self) -> None:
        """Immediate shutdown (it is about to be deleted), SIGKILL after 10 s, then its
        leftover processes, its cgroup, its directory and its storage. Idempotent."""
        if self.storage is not None:  # nothing waits out a delay while it goes
            self.storage.undelay()
        try:
            self._stop_server()
        finally:
            try:
                self._remove_cgroup()
                if self._made_root:
                    shutil.rmtree(self.root, ignore_errors=True)
                    self._made_root = False
            finally:
                if self.storage is not None and self._storage_built:
                    self.storage.teardown()
                    self._storage_built = False

    def _stop_server(self) -> None:
        proc, self.postmaster = self.postmaster, None
        if proc is not None and proc.poll() is None:
            for sig, wait_s in ((signal.SIGQUIT, STOP_TIMEOUT_S), (signal.SIGKILL, 10)):
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(sig)
                try:
                    proc.wait(timeout=wait_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
        # Backends notice the postmaster's death; whatever lingers in its directory is ours.
        deadline = time.monotonic() + 10
        while processes_in(self.data_dir) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in processes_in(self.data_dir):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def _remove_cgroup(self) -> None:
        group, self._accounting = self._accounting, None
        if group is None:
            return
        self.io_cgroup = self.io_account = None
        for pid in group.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        group.remove()

    # -- what is read of it -----------------------------------------------------------------
    def log_tail(self, lines: int = 20) -> str | None:
        if not self.log.exists():
            return None
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def record(self) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {
            "name": self.name,
            "location": str(self.root),
            "port": self.port,
            "version": self.version or self.install.version,
        }
        if self.data_dir.exists():
            out["device"] = dict(describe_path(self.data_dir))
        if self.storage is not None:
            out["emulation"] = self.storage.record()
        return out

    def host(self) -> Host:
        return LocalHost(self.install)

    def storage_paths(self) -> dict[str, Path]:
        return {self.name: self.data_dir} if self.data_dir.exists() else {}

    def server_io(self) -> ServerIo | None:
        if self.postmaster is None:
            return None
        pid = self.postmaster.pid if self.alive() else None
        return ServerIo(self.io_account, lambda: pid, self.io_account_note)
