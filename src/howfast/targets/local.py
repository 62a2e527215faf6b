"""A throwaway PostgreSQL cluster that howfast creates with initdb in a directory it owns.

Layout: the data (and WAL, unless --wal-dir) live on the storage under test in
`<target>/howfast-<token>/`; the socket, server log and pgbench logs live in a private run
directory on another filesystem (tmpfs when available), so they add no I/O to the storage
being measured.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

from howfast.errors import HowfastError, UsageError
from howfast.hosts.base import Host
from howfast.hosts.local import LocalHost
from howfast.machine.cgroup import CgroupSupport, IoCgroup, MemoryCgroup, detect
from howfast.machine.fsinfo import describe_path, same_filesystem, whole_disk_number
from howfast.machine.memory import cap_problem
from howfast.machine.pgbin import PgInstall
from howfast.machine.serverio import IoAccount, ServerIo, open_accounting
from howfast.model import JSONValue, TargetRecord
from howfast.targets import pgquery
from howfast.targets.base import Connection, PlannedConnection, PlannedTarget, Target
from howfast.targets.capabilities import (
    AppliesStepSettings,
    ClientPlacement,
    Crashable,
    HasClient,
    HasCurrentPrimary,
    HasLocalServer,
    HasLocalStandbys,
    HasServerIdentity,
    HasServerLog,
    HasStandbys,
    HasStorage,
    HoldsDirectoryLock,
    IoCappable,
    Keepable,
    Promotable,
    Restartable,
    ServerIdentity,
    StandbyMember,
)
from howfast.targets.claim import Claim, check_directory, claim_directory
from howfast.targets.dirlock import DirectoryLock, lock_directory
from howfast.targets.iocap import IopsCap
from howfast.targets.leftovers import registry
from howfast.targets.leftovers.marks import KEPT, mark_kept, write_owner
from howfast.targets.local_server import conf_line, free_port, processes_in, runtime_base
from howfast.targets.osuser import OsUser, check_reachable, current_user, server_user
from howfast.targets.replicas import failover
from howfast.targets.replicas.builders import primary_replication_settings, slot_keep_bytes
from howfast.targets.replicas.local import LocalStandby, StandbyStorage
from howfast.targets.replicas.set import ReplicaSet
from howfast.targets.replicas.spec import ReplicaSpec

SUPERUSER = "howfast"
START_TIMEOUT_S = 60
START_LOG_LINES = 10  # of the server log, in the message of a start that failed
STOP_TIMEOUT_S = 60


def start_failure(what: str, log_tail: str | None) -> str:
    """Why a server did not start, with the server log's last lines, which say why."""
    if not log_tail or not log_tail.strip():
        return f"{what}; the server log is empty"
    return f"{what}; the server log's last lines:\n{log_tail}"


def check_earlier_clusters(directory: Path, role: str) -> list[str]:
    """Refuse a directory where a server of an earlier howfast cluster still runs: left by a
    howfast that was killed (SIGKILL cannot be caught), or a --keep cluster started again. It
    would compete for the storage under test; howfast does not stop what it did not start.
    Returns a warning for each stopped one (it takes space), saying how to remove it: the
    caller holds the directory's lock, so nothing here belongs to a live run."""
    cleanup = f"howfast cleanup --target {directory}"
    warnings = []
    for cluster in sorted(p for p in directory.glob("howfast-*") if p.is_dir()):
        pids = processes_in(cluster)
        if pids:
            data_dir = _working_dir(min(pids)) or cluster / "data"
            raise UsageError(
                f"{role} {directory} holds {cluster.name} from an earlier run whose howfast "
                "is gone, and its server is still running (PIDs "
                f"{', '.join(map(str, sorted(pids)))}); it would compete for the storage under "
                "test",
                f"`{cleanup}` lists what that run left, and with --yes stops its server and "
                f"removes the rest; or stop it by hand, `pg_ctl -D {data_dir} stop -m fast` as "
                "its OS user",
            )
        if (cluster / KEPT).exists() or (cluster / "server.log").is_file():
            how = "kept with --keep; it is left alone: remove it when you no longer need it"
        elif cluster.name.startswith("howfast-vol-"):
            how = (
                "an emulated volume left by a howfast that was killed (its image, and maybe a "
                f"mount and a loop device, stay until removed): `{cleanup} --yes` removes it"
            )
        else:
            how = f"left by a howfast that was killed: `{cleanup} --yes` removes it"
        warnings.append(f"{role} {directory} holds {cluster.name} from an earlier run, {how}")
    return warnings


def _working_dir(pid: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd").removesuffix(" (deleted)"))
    except OSError:
        return None


LocalClient = Literal["socket", "tcp"]
TCP_ADDRESS = "127.0.0.1"  # --client tcp: loopback only


def client_placement(
    mode: LocalClient, server: Connection, host: Host, password: str | None
) -> ClientPlacement:
    """pgbench on this machine, over the server's socket or over TCP to 127.0.0.1 on the
    server's port (with the password, which reaches pgbench through its environment only)."""
    if mode == "tcp":
        conn = replace(server, host=TCP_ADDRESS, password=password)
        return ClientPlacement(
            host, conn, {"placement": "tcp", "address": f"{TCP_ADDRESS}:{server.port}"}
        )
    address = f"{server.host}/.s.PGSQL.{server.port}"
    return ClientPlacement(host, server, {"placement": "socket", "address": address})


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


class LocalTarget(
    Target,
    HasStorage,
    HasServerLog,
    HasLocalServer,
    Restartable,
    Crashable,
    HasServerIdentity,
    AppliesStepSettings,
    HoldsDirectoryLock,
    Keepable,
    IoCappable,
    HasStandbys,
    HasLocalStandbys,
    HasCurrentPrimary,
    Promotable,
    HasClient,
):
    kind = "local"

    def __init__(
        self,
        directory: Path,
        install: PgInstall,
        *,
        wal_dir: Path | None = None,
        settings: dict[str, str] | None = None,
        keep: bool = False,
        checksums: bool = False,
        name: str | None = None,
        memory_limit: int | None = None,
        replicas: ReplicaSpec | None = None,
        standby_dirs: Sequence[Path] = (),
        standby_storage: Callable[[Path], StandbyStorage] | None = None,
        standby_volume_root: Path | None = None,
        client: LocalClient = "socket",
    ) -> None:
        self.directory = directory.absolute()
        self.wal_root = wal_dir.absolute() if wal_dir else None
        self.install = install
        self.settings = dict(settings or {})
        self.keep = keep
        self.checksums = checksums
        self.name = name or str(self.directory)
        self.user: OsUser | None = None
        self.token = secrets.token_hex(4)
        self.cluster_dir = self.directory / f"howfast-{self.token}"
        self.data_dir = self.cluster_dir / "data"
        self.wal_cluster_dir = self.wal_root / f"howfast-{self.token}" if self.wal_root else None
        self.run_dir: Path | None = None
        self.server_log: Path | None = None
        self.postmaster: subprocess.Popen[bytes] | None = None
        self.connection: Connection | None = None
        self.port = 0  # set by start(): the port the server listens on
        self._claims: list[Claim] = []
        self._locks: list[DirectoryLock] = []  # one run at a time per directory
        self._created: list[Path] = []
        self.warnings: list[str] = []
        self.step_settings: dict[str, str] = {}  # ALTER SYSTEM overrides now in force
        self.memory_limit = memory_limit  # --memory: the server runs in a capped cgroup
        self.cgroup_support: CgroupSupport | None = None
        self.cgroup: MemoryCgroup | None = None
        # I/O limits set by whoever built the storage (an emulated volume); not ours to remove
        self.io_cgroup: IoCgroup | None = None
        # Where PostgreSQL's own I/O is counted (machine/serverio.py); the cgroup made for it
        # (no limits) is ours to remove at stop.
        self.io_account: IoAccount | None = None
        self.io_account_note: str | None = None
        self._accounting_cgroup: IoCgroup | None = None
        # --replicas N: standbys built from this primary at start (targets/replicas/)
        self.replicas = replicas
        self.standby_dirs = [d.absolute() for d in standby_dirs]
        # standby_latency: each standby on storage of its own, made in its standby
        # directory, else in `standby_volume_root` (an emulated target's directory, around
        # this cluster's volume), else in this target's directory
        self.standby_storage = standby_storage
        self.standby_volume_root = standby_volume_root
        self.replica_set: ReplicaSet | None = None
        self._standby_locked: set[Path] = set()
        self._iops_cap: IopsCap | None = None  # cap-iops events, on the accounting cgroup
        self.promoted: str | None = None  # the standby a failover made the primary
        # Once the design is rebuilt after a failover: the former standby that is the primary
        # now (the original primary's server is gone, its data directory removed)
        self.serving: LocalStandby | None = None
        self.rebuilds = 0  # how many times the design was rebuilt (the new standbys' names)
        # --client tcp: pgbench reaches the server over 127.0.0.1 with a password (random,
        # in memory only) that the TCP lines of pg_hba.conf ask for; howfast's own
        # connections stay on the socket
        self.client_mode: LocalClient = client
        self._tcp_password = secrets.token_urlsafe(24) if client == "tcp" else None

    # -- checks before anything is created --------------------------------------------
    def check_inputs(self) -> None:
        """The directories (target, WAL, standbys: each existing, writable, empty or
        howfast's) and the options that cannot go together, read only: the run service
        calls it before a run and before its dry run alike."""
        check_directory(self.directory, "target directory")
        if self.wal_root:
            check_directory(self.wal_root, "WAL directory")
        if self.replicas is None:
            return
        if self.keep:
            raise UsageError(
                "--keep keeps one cluster; a primary with standbys is removed at the end "
                "(drop --keep or --replicas)"
            )
        if len(self.standby_dirs) > 1 and len(self.standby_dirs) != self.replicas.count:
            raise UsageError(
                f"give one --standby-dir, or one per standby ({self.replicas.count}), not "
                f"{len(self.standby_dirs)}"
            )
        for directory in dict.fromkeys(self.standby_dirs):
            check_directory(directory, "standby directory")

    def check(self, *, will_init: bool) -> None:
        self.check_inputs()
        if not self._locks:  # before looking for servers: a live run's are not "earlier"
            self._locks.append(lock_directory(self.directory, "target directory"))
        self.warnings = check_earlier_clusters(self.directory, "target directory")
        if self.wal_root:
            if len(self._locks) < 2:
                self._locks.append(lock_directory(self.wal_root, "WAL directory"))
            self.warnings += check_earlier_clusters(self.wal_root, "WAL directory")
        missing = [p for p in ("initdb", "postgres", "pgbench") if not self.install.program(p)]
        if missing:
            raise HowfastError(
                f"{self.install.bindir}: missing {', '.join(missing)}",
                "install the PostgreSQL server: sudo apt-get install -y postgresql",
            )
        self.user = server_user()
        check_reachable(self.user, self.directory)
        if self.wal_root:
            check_reachable(self.user, self.wal_root)
        if self.memory_limit is not None:
            self._check_memory_limit(self.memory_limit)
        if self.replicas is not None:
            self._check_replicas(self.replicas)

    def _check_replicas(self, spec: ReplicaSpec) -> None:
        """Refuse what standbys cannot do here before anything is created (beyond what
        check_inputs refused: the options and directories)."""
        if self.standby_storage is not None:
            self.standby_storage(self.directory).check()
        if not self.install.program("pg_basebackup"):
            raise HowfastError(
                f"{self.install.bindir}: missing pg_basebackup (standbys are built with it)",
                "install the PostgreSQL server: sudo apt-get install -y postgresql",
            )
        assert self.user is not None
        for directory in dict.fromkeys(self.standby_dirs):
            if directory not in (self.directory, self.wal_root, *self._standby_locked):
                self._locks.append(lock_directory(directory, "standby directory"))
                self._standby_locked.add(directory)
                self.warnings += check_earlier_clusters(directory, "standby directory")
            check_reachable(self.user, directory)

    def _check_memory_limit(self, limit: int) -> None:
        """Refuse --memory before anything runs when it cannot be honoured."""
        support = detect()
        if support.version is None:
            raise UsageError(
                f"--memory needs a cgroup memory controller: {support.reason}",
                "run howfast as root on a machine with cgroups, or drop --memory",
            )
        problem = cap_problem(limit, self.settings)
        if problem:
            raise UsageError(
                problem,
                "raise --memory, or lower the settings, e.g. --set shared_buffers=16MB "
                "--set maintenance_work_mem=8MB",
            )
        self.cgroup_support = support

    # -- lifecycle ------------------------------------------------------------------------
    def _as_server_user(self) -> dict[str, object]:
        assert self.user is not None
        return dict(self.user.subprocess_kwargs())

    def _make_owned_dir(self, path: Path, role: str) -> None:
        registry.own_directory(path, role)  # before it exists: a kill at any moment finds it
        path.mkdir(mode=0o700)
        self._created.append(path)
        assert self.user is not None
        if self.user.uid != os.geteuid():
            os.chown(path, self.user.uid, self.user.gid)

    def start(self) -> Connection:
        if self.user is None:
            self.check(will_init=True)
        assert self.user is not None
        self._claims.append(claim_directory(self.directory))
        self._make_owned_dir(self.cluster_dir, "cluster")
        avoid = [self.directory] + ([self.wal_root] if self.wal_root else [])
        avoid += [d for d in dict.fromkeys(self.standby_dirs) if d not in avoid]
        base = runtime_base(avoid)
        if any(same_filesystem(base, p) for p in avoid):
            self.warnings.append(
                f"the run directory {base} is on the storage under test: the server log "
                "and pgbench's logs add I/O to what is measured"
            )
        self.run_dir = Path(tempfile.mkdtemp(prefix=f"howfast-run-{self.token}-", dir=base))
        self._created.append(self.run_dir)
        write_owner(self.run_dir, directories=avoid, token=self.token)  # for howfast cleanup
        registry.own_directory(self.run_dir, "private")
        if self.user.uid != os.geteuid():
            os.chown(self.run_dir, self.user.uid, self.user.gid)
        if self.wal_root and self.wal_cluster_dir:
            self._claims.append(claim_directory(self.wal_root))
            self._make_owned_dir(self.wal_cluster_dir, "wal")
        self._initdb()
        # The user's --set wins over howfast's replication settings, on purpose.
        settings = {
            **base_settings(free_port(), self.run_dir),
            **({"listen_addresses": TCP_ADDRESS} if self.client_mode == "tcp" else {}),
            **self._replication_settings(),
            **self.settings,
        }
        # The port in force: the plan or --set may have chosen one over the free one.
        try:
            self.port = int(settings["port"])
        except ValueError:
            raise UsageError(f"port = {settings['port']!r} is not a port number") from None
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write("\n# set by howfast\n")
            for name, value in settings.items():
                conf.write(conf_line(name, value))
        self.server_log = self.run_dir / "server.log"
        if self.memory_limit is not None:
            if self.cgroup_support is None:
                self._check_memory_limit(self.memory_limit)
            assert self.cgroup_support is not None
            self.cgroup = MemoryCgroup(
                self.cgroup_support, f"howfast-{self.token}", self.memory_limit
            )
            self.cgroup.create()  # removed by stop(), which the runner calls whatever happens
            registry.own_cgroup(self.cgroup.path, self.data_dir)
        self._open_io_accounting()
        self._start_postmaster()
        self.connection = Connection(
            host=str(self.run_dir), port=self.port, user=SUPERUSER, dbname="postgres"
        )
        if self.replicas is not None:
            self._start_standbys(self.replicas, self.connection)
        return self.connection

    def _replication_settings(self) -> dict[str, str]:
        if self.replicas is None:
            return {}
        wal = self.wal_root or self.directory
        try:
            free = os.statvfs(wal).f_bavail * os.statvfs(wal).f_frsize
        except OSError:
            free = None
        return primary_replication_settings(self.replicas, slot_keep_bytes(free))

    def _standby_members(self, spec: ReplicaSpec) -> list[LocalStandby]:
        """standby_i in the primary's cluster directory (removed with it), or in
        `--standby-dir` (one for all, or one each) as howfast-<its own token>: the shape of a
        cluster, which `howfast cleanup` stops and removes when a killed run left it."""
        return [self._standby_member(i, name) for i, name in enumerate(spec.names)]

    def _standby_member(self, i: int, name: str, rebuilt: int = 0) -> LocalStandby:
        """Standby `name` (the i-th): where it goes, its storage and cgroup. A standby
        rebuilt after a failover (the `rebuilt`-th time) goes where the design puts it, in a
        directory of its own: `<name>-rebuilt-<n>` in the cluster directory (the promoted one
        still lives in `<name>`), else a new `howfast-<token>` or volume, as at start."""
        assert self.user is not None and self.run_dir is not None
        parent = self.standby_volume_root or self.directory
        if self.standby_dirs:
            parent = self.standby_dirs[i if len(self.standby_dirs) > 1 else 0]
            root = parent / f"howfast-{secrets.token_hex(4)}"
        else:
            root = self.cluster_dir / (f"{name}-rebuilt-{rebuilt}" if rebuilt else name)
        storage = self.standby_storage(parent) if self.standby_storage else None
        # its own token: a cgroup a killed howfast left is found by its name's shape
        cgroup = f"howfast-standby-{secrets.token_hex(4)}"
        return LocalStandby(
            name, self.install, self.user, root, self.run_dir, cgroup_name=cgroup, storage=storage
        )

    def _start_standbys(self, spec: ReplicaSpec, primary: Connection) -> None:
        for directory in dict.fromkeys(self.standby_dirs):
            if directory not in (self.directory, self.wal_root):
                self._claims.append(claim_directory(directory))
        self.replica_set = ReplicaSet(
            spec, primary, self._standby_members(spec), put_in_force=self._put_in_force
        )
        self.replica_set.start(timeout_s=START_TIMEOUT_S)

    def _put_in_force(self, settings: Mapping[str, str]) -> None:
        """Replication settings in postgresql.conf, then a reload: a step's ALTER SYSTEM
        settings (reset between steps) cannot undo them."""
        assert self.connection is not None
        with (self._primary_data_dir() / "postgresql.conf").open("a") as conf:
            conf.write("# the replication design, set by howfast once the standbys stream\n")
            for name, value in settings.items():
                conf.write(conf_line(name, value))
        pgquery.reload_and_wait(self.connection)

    def standbys(self) -> Sequence[StandbyMember]:
        return list(self.replica_set.members) if self.replica_set else []

    def standby_records(self) -> tuple[dict[str, JSONValue], ...]:
        """What the target's record says of each standby, with its sync state now."""
        if self.replica_set is None:
            return ()
        states = self.replica_set.sync_states() if self.alive() else {}
        return tuple(
            {**dict(m.record()), "sync_state": states.get(m.name) or None}
            for m in self.replica_set.members
        )

    def _disks(self) -> list[str]:
        """The whole disks (MAJ:MIN) under the data and the WAL."""
        paths = [self.data_dir] + ([self.wal_cluster_dir] if self.wal_cluster_dir else [])
        return [d for d in map(whole_disk_number, paths) if d is not None]

    def _open_io_accounting(self) -> None:
        """Always an I/O cgroup for the server, so its own I/O can be told from the device's."""
        disks = self._disks()
        found = open_accounting(f"howfast-io-{self.token}", self.cgroup, self.io_cgroup, disks)
        self.io_account, self.io_account_note = found.account, found.warning
        if found.created is not None:
            self._accounting_cgroup = self.io_cgroup = found.created
            registry.own_cgroup(found.created.path, self.data_dir)
        if found.warning:
            self.warnings.append(found.warning)

    def _initdb(self) -> None:
        """initdb; with --client tcp the password file lives in the private run directory
        only while initdb reads it."""
        pwfile = self._password_file()
        if self._tcp_password is None or pwfile is None:
            self._run_checked(self._initdb_argv(), "initdb")
            return
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as out:
                out.write(self._tcp_password + "\n")
            assert self.user is not None
            if self.user.uid != os.geteuid():
                os.chown(pwfile, self.user.uid, self.user.gid)
            self._run_checked(self._initdb_argv(), "initdb")
        finally:
            pwfile.unlink(missing_ok=True)

    def _password_file(self) -> Path | None:
        if self.client_mode != "tcp":
            return None
        run_dir = self.run_dir or Path(f"howfast-run-{self.token}-XXXXXXXX")
        return run_dir / "client-password"

    def _initdb_argv(self) -> list[str]:
        pwfile = self._password_file()
        auth = (
            # the socket as before; TCP (127.0.0.1 only) asks for the password
            ["--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}"]
            if pwfile is not None
            # socket-only in a 0700 directory: only this user and root get in
            else ["--auth=trust"]
        )
        argv = [
            str(self.install.program("initdb") or "initdb"),
            "-D",
            str(self.data_dir),
            "-U",
            SUPERUSER,
            *auth,
            "--encoding=UTF8",
            "--locale=C",
        ]
        if self.checksums:
            argv.append("--data-checksums")
        if self.wal_cluster_dir:
            argv.append(f"--waldir={self.wal_cluster_dir / 'pg_wal'}")
        return argv

    def _postgres_argv(self) -> list[str]:
        return [str(self.install.program("postgres") or "postgres"), "-D", str(self.data_dir)]

    def _run_checked(self, argv: list[str], what: str) -> None:
        out = subprocess.run(
            argv, capture_output=True, text=True, check=False, **self._as_server_user()
        )  # type: ignore[call-overload]
        if out.returncode != 0:
            tail = "\n".join((out.stderr or out.stdout).strip().splitlines()[-5:])
            raise HowfastError(f"{what} failed (exit {out.returncode}): {tail}")

    def _launch_postmaster(self) -> None:
        assert self.server_log is not None and self.run_dir is not None
        with self.server_log.open("ab") as log:
            if self.user and self.user.uid != os.geteuid():
                os.chown(self.server_log, self.user.uid, self.user.gid)

            def launch() -> subprocess.Popen[bytes]:
                return subprocess.Popen(  # type: ignore[call-overload,no-any-return]
                    self._postgres_argv(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # Ctrl-C reaches howfast, which stops the server
                    **self._as_server_user(),
                )

            # In the --memory (and I/O) cgroup, every server process is born inside it.
            start = launch
            for group in (self.cgroup, self.io_cgroup):
                if group is not None:
                    start = functools.partial(group.spawn, start)
            self.postmaster = start()

    def _start_postmaster(self, *, listening_is_enough: bool = False) -> None:
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
                        self.server_log_tail(START_LOG_LINES),
                    )
                )
            if pg_isready and self._isready(pg_isready) in enough:
                # what a kill of this server would leave, for howfast cleanup
                registry.own_server_memory(self.postmaster.pid, self.data_dir)
                return
            time.sleep(0.1)
        raise HowfastError(
            start_failure(
                f"PostgreSQL did not become ready within {START_TIMEOUT_S} s (it was still "
                "starting up)",
                self.server_log_tail(START_LOG_LINES),
            )
        )

    def _isready(self, pg_isready: Path) -> int:
        """pg_isready's status: 0 accepting, 1 rejecting (starting up), 2 no response."""
        # -d postgres: without it the probe asks for a database named after the user, and the
        # server logs a FATAL "database does not exist" for every probe (and every log tail)
        where = ["-h", str(self.run_dir), "-p", str(self.port), "-U", SUPERUSER, "-d", "postgres"]
        out = subprocess.run(
            [str(pg_isready), "-q", *where],
            capture_output=True,
            check=False,
        )
        return out.returncode

    def _tidy_after_crash(self) -> None:
        """A server that died without shutting down (killed, OOM) leaves its shared memory
        behind: a System V segment and /dev/shm/PostgreSQL.* files. A postmaster starting on
        the same data directory removes exactly those, so start it once, then stop it."""
        try:
            self._start_postmaster(listening_is_enough=True)
        except HowfastError:
            pass  # it could not start (the cause of the crash?); nothing more to do
        finally:
            self._stop_postmaster(signal.SIGQUIT)

    def host(self) -> Host:
        """This machine, with PostgreSQL's programs from the target's install."""
        return LocalHost(self.install)

    def start_warnings(self) -> tuple[str, ...]:
        return tuple(self.warnings)

    def client(self) -> ClientPlacement:
        """Where pgbench runs (this machine) and how it reaches the server (after start)."""
        assert self.connection is not None, "client() is known after start"
        return client_placement(self.client_mode, self.connection, self.host(), self._tcp_password)

    def record(self) -> TargetRecord:
        device: dict[str, object] = {}
        if self.data_dir.exists():
            device["data"] = describe_path(self.data_dir)
            wal = self.wal_cluster_dir or self.data_dir
            device["wal"] = describe_path(wal)
            device["wal_on_data_device"] = same_filesystem(wal, self.data_dir)
        if self.cgroup is not None:
            device["memory_limit_bytes"] = self.cgroup.limit_bytes
            device["memory_cgroup"] = {
                "version": self.cgroup.version,
                "path": str(self.cgroup.path),
            }
        version: str | None = None
        settings: dict[str, str] = {}
        if self.connection and self.alive():
            version, settings = pgquery.server_facts(self.connection)
        return TargetRecord(
            name=self.name,
            kind=self.kind,
            pg_version=version or self.install.version,
            settings=settings,
            device=device,
            location=str(self.directory),
            standbys=self.standby_records(),
            client=dict(self.client().record) if self.connection else {},
        )

    def alive(self) -> bool:
        return self._postmaster_pid() is not None

    def server_log_tail(self, lines: int = 20) -> str | None:
        if self.serving is not None:
            return self.serving.log_tail(lines)
        if not self.server_log or not self.server_log.exists():
            return None
        return "\n".join(self.server_log.read_text(errors="replace").splitlines()[-lines:])

    def scratch_dir(self) -> Path | None:
        return self.cluster_dir if self.cluster_dir.exists() else None

    def planned(self) -> PlannedTarget:
        return PlannedTarget(
            host=self.host(),
            connection=self._planned_connection(),
            scratch_dir=self.cluster_dir,
            start=self._planned_start(),
        )

    def _planned_connection(self) -> Connection:
        """The socket directory is made at start (a fresh private directory), the port
        chosen then unless the settings name one."""
        wanted = [self.directory] + ([self.wal_root] if self.wal_root else [])
        avoid = [next(p for p in (d, *d.parents) if p.exists()) for d in wanted]
        socket_dir = runtime_base(avoid) / f"howfast-run-{self.token}-XXXXXXXX"
        port = self.settings.get("port")
        return PlannedConnection(
            # --client tcp: what pgbench and the round-trip probe dial
            host=TCP_ADDRESS if self.client_mode == "tcp" else str(socket_dir),
            port=0,
            user=SUPERUSER,
            dbname="postgres",
            port_text=port or "PORT",
        )

    def _planned_start(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """What start() runs before any step, for --dry-run: initdb and the server, then
        each standby's base backup and server, and the design put in force."""
        steps: tuple[tuple[str, tuple[str, ...]], ...] = (
            ("initdb, as the server's OS user", tuple(self._initdb_argv())),
            ("the server, in its own session", tuple(self._postgres_argv())),
        )
        if self.replicas is None:
            return steps
        primary = self._planned_connection()
        # no server_user(): as root it may create a user, and a dry run creates nothing
        user, run_dir = self.user or current_user(), Path(primary.host)
        for member in self._planned_members(self.replicas, user, run_dir):
            steps += member.planned(primary)
        spec = self.replicas
        return (
            *steps,
            (
                "the primary: in postgresql.conf once the standbys stream, then a reload",
                (
                    f'synchronous_standby_names = "{spec.synchronous_standby_names}"',
                    f'synchronous_commit = "{spec.synchronous_commit}"',
                ),
            ),
        )

    def _planned_members(
        self, spec: ReplicaSpec, user: OsUser, run_dir: Path
    ) -> list[LocalStandby]:
        saved, self.user, self.run_dir = (self.user, self.run_dir), user, run_dir
        try:
            return self._standby_members(spec)
        finally:
            self.user, self.run_dir = saved

    def storage_paths(self) -> dict[str, Path]:
        if self.serving is not None:  # the promoted standby's WAL is in its data directory
            return {"data": self.serving.data_dir, "wal": self.serving.data_dir}
        if not self.data_dir.exists():
            return {}
        wal = (self.wal_cluster_dir or self.data_dir) / "pg_wal"
        return {"data": self.data_dir, "wal": wal if wal.exists() else self.data_dir}

    def standby_storage_paths(self) -> dict[str, Path]:
        """The standbys' data directories, by name: on this machine, like the primary's."""
        paths: dict[str, Path] = {}
        for member in self.standbys():
            paths.update(member.storage_paths())
        return paths

    def server_log_file(self) -> Path | None:
        return self.serving.log if self.serving is not None else self.server_log

    def apply_step_settings(self, settings: Mapping[str, str]) -> None:
        """ALTER SYSTEM over the plan's postgresql.conf, then a reload, or a restart when a
        setting only takes effect at server start (shared_buffers...)."""
        if settings == self.step_settings:
            return
        assert self.connection is not None
        in_force, self.step_settings = self.step_settings, {}  # the plan's, if refused
        self.step_settings = pgquery.apply_step_settings(
            self.connection, dict(settings), in_force, self.restart
        )

    def restart(self) -> Mapping[str, JSONValue]:
        """Fast shutdown (a clean checkpoint) and start again, in the same cgroup; with
        standbys, back once they stream again (their walreceivers retry every 5 s): how
        long that took after the server accepted connections is `standbys_streaming_s`."""
        self._refuse_after_failover("restart")
        self._refuse_on_promoted("restart")
        self._stop_postmaster(signal.SIGINT)
        self._start_postmaster()
        started = time.monotonic()
        if self.replica_set is None:
            return {}
        self.replica_set.wait_streaming(START_TIMEOUT_S)
        return {"standbys_streaming_s": round(time.monotonic() - started, 3)}

    def crash(self) -> Mapping[str, JSONValue]:
        """SIGKILL of the postmaster (no shutdown, no checkpoint), wait until every process
        in the data directory is gone (SIGKILL to the ones that linger), start: the server
        replays its WAL (crash recovery). Same cgroups, same port. With standbys, back once
        they stream again, as after a restart: a failover after it promotes a standby that
        streams, not one still waiting to reconnect (its walreceiver retries every 5 s)."""
        self._refuse_after_failover("crash")
        self._refuse_on_promoted("crash")
        killed = self._postmaster_pid()
        began = time.monotonic()
        self._stop_postmaster(signal.SIGKILL)
        gone = time.monotonic()
        self._start_postmaster()
        started = time.monotonic()
        facts: dict[str, JSONValue] = {
            "killed_pid": killed,
            "processes_gone_s": round(gone - began, 3),
            "started_s": round(started - gone, 3),
        }
        if self.replica_set is not None:
            self.replica_set.wait_streaming(START_TIMEOUT_S)
            facts["standbys_streaming_s"] = round(time.monotonic() - started, 3)
        return facts

    # -- failover (issue 29: targets/replicas/failover.py) ------------------------------------
    def promotable_standbys(self) -> tuple[str, ...]:
        return self.replicas.names if self.replicas is not None else ()

    def failover_refusal(self) -> str | None:
        if self.client_mode != "socket":
            # the load follows the promoted standby through the servers' sockets
            return "failover with --client tcp is not available yet: give --client socket"
        return None

    def connection_now(self) -> Connection:
        assert self.connection is not None
        return self.connection

    def client_connection_now(self, follow: bool = False) -> Connection:
        """With `follow`, the standbys' sockets after the primary's: libpq takes the first
        that accepts writes, the promoted standby after a failover."""
        conn = self.connection_now()
        if not follow or self.replica_set is None:
            return conn
        others = tuple(
            (str(m.run_dir), m.port)
            for m in self.replica_set.members
            if isinstance(m, LocalStandby) and m.connection is not None
        )
        return dataclasses.replace(conn, alternates=others)

    def fail_over(self, standby: str) -> Mapping[str, JSONValue]:
        """The primary killed as a failed node, `standby` promoted; howfast's connection is
        the new primary's from then on. Only with a single standby: no other to re-point."""
        self._refuse_after_failover("fail over")
        members = self.replica_set.members if self.replica_set is not None else []
        member = next((m for m in members if m.name == standby), None)
        primary = self.serving.postmaster if self.serving is not None else self.postmaster
        if not isinstance(member, LocalStandby) or primary is None:
            raise HowfastError(f"no standby {standby} to promote")
        killed = self._postmaster_pid()
        began = time.monotonic()
        failover.kill_all(primary, self._primary_data_dir())
        gone = time.monotonic()
        self.connection = failover.promote(member)
        self.promoted = member.name
        return {
            "killed_pid": killed,
            "promoted": member.name,
            "promoted_pid": member.postmaster.pid if member.postmaster else None,
            "processes_gone_s": round(gone - began, 3),
            "promoted_s": round(time.monotonic() - gone, 3),
        }

    def _refuse_after_failover(self, what: str) -> None:
        """The old primary is never started again (no split brain)."""
        if self.promoted is not None:
            raise HowfastError(
                f"cannot {what} the server: a failover promoted {self.promoted}, and the old "
                "primary is never started again"
            )

    def _refuse_on_promoted(self, what: str) -> None:
        """After a rebuild the primary is a promoted standby: howfast does not restart it."""
        if self.serving is not None:
            raise HowfastError(
                f"cannot {what} the server: since a failover the primary is the promoted "
                f"{self.serving.name}, and restarting a promoted standby is not available yet"
            )

    def _primary_data_dir(self) -> Path:
        return self.serving.data_dir if self.serving is not None else self.data_dir

    def restore_design(self) -> Mapping[str, JSONValue] | None:
        """Between steps, after a failover: the killed primary's shared memory freed and its
        data directory removed, then the lost standby made again from the promoted server (a
        base backup, as at start, where the design puts a standby), streaming, caught up and
        in the sync state asked. The facts of it, for the later steps; None when there was
        no failover. A HowfastError (the later steps are skipped with it) when it fails."""
        if self.promoted is None:
            return None
        members = self.replica_set.members if self.replica_set is not None else []
        promoted = next((m for m in members if m.name == self.promoted), None)
        if not isinstance(promoted, LocalStandby) or promoted.connection is None:
            raise HowfastError(f"the promoted {self.promoted} is not a standby of this target")
        assert self.replica_set is not None and self.replicas is not None
        assert self.user is not None and self.run_dir is not None
        if not promoted.alive():
            raise HowfastError(f"the promoted {promoted.name} is not running any more")
        began = time.monotonic()
        removed = self._remove_killed_primary()
        self.serving = promoted  # stop() stops it from now on
        self.connection = promoted.connection
        removed_s = time.monotonic() - began
        # promote() emptied synchronous_standby_names by ALTER SYSTEM, and its copied
        # standby block empties it too: both go, the design is written in postgresql.conf
        pgquery.alter_system(
            promoted.connection, {}, reset={"synchronous_standby_names", "synchronous_commit"}
        )
        self.rebuilds += 1
        index = self.replicas.names.index(promoted.name)
        member = self._standby_member(index, promoted.name, rebuilt=self.rebuilds)
        parts = self.replica_set.rebuild(
            promoted.connection, promoted, member, timeout_s=START_TIMEOUT_S
        )
        self.promoted = None
        states = self.replica_set.sync_states()
        return {
            "primary": promoted.name,
            "primary_location": str(promoted.root),
            "primary_port": promoted.port,
            "standby": member.name,
            "standby_location": str(member.root),
            "standby_sync_state": states.get(member.name) or None,
            "old_primary_removed": removed,
            "seconds": round(time.monotonic() - began, 3),
            "old_primary_removed_s": round(removed_s, 3),
            **parts,
        }

    def _remove_killed_primary(self) -> str:
        """The primary a failover killed: its shared memory freed (failover.tidy_killed), its
        data directory (and WAL) removed; only what howfast made. Returns the path removed."""
        assert self.user is not None and self.run_dir is not None
        old = self.serving
        if old is None:  # the original primary: its cluster directory holds the standbys
            log = self.server_log or self.run_dir / "server.log"
            failover.tidy_killed(self.install, self.user, self.data_dir, self.run_dir, log)
            self.postmaster = None  # gone and tidied: stop() has nothing to tidy
            if self.wal_cluster_dir is not None:
                shutil.rmtree(self.wal_cluster_dir / "pg_wal", ignore_errors=True)
            shutil.rmtree(self.data_dir, ignore_errors=True)
            return str(self.data_dir)
        failover.tidy_killed(self.install, self.user, old.data_dir, self.run_dir, old.log)
        old.stop()  # its directory, cgroup and storage
        return str(old.root)

    def server_identity(self) -> ServerIdentity:
        """The postmaster's pid (held here) and its start time (asked over SQL: None when
        the server does not answer)."""
        started = None
        if self.connection is not None and self.alive():
            with contextlib.suppress(HowfastError):
                started = pgquery.postmaster_start_time(self.connection)
        return ServerIdentity(pid=self._postmaster_pid(), started_at=started)

    def cap_iops(self, iops: int | None) -> Mapping[str, JSONValue]:
        """Cap (or, None, lift) the read and write IOPS of the cgroup the server's own I/O is
        counted in, on the data's and WAL's disks; lifting restores the rules from before."""
        self._refuse_on_promoted("cap the IOPS of")
        if self.io_account is None:
            raise HowfastError(
                f"the server has no I/O cgroup to cap: {self.io_account_note or 'none was made'}"
            )
        if self._iops_cap is None:
            self._iops_cap = IopsCap(self.io_account, self._disks())
        return self._iops_cap.set(iops)

    def server_iops_since(self, t: float) -> float | None:
        return self._iops_cap.iops_since(t) if self._iops_cap is not None else None

    def memory_cgroup(self) -> MemoryCgroup | None:
        # the promoted standby runs in no memory cgroup (docs/events.md)
        return self.cgroup if self.serving is None else None

    def server_io(self) -> ServerIo | None:
        if self.serving is not None:
            return self.serving.server_io()
        if self.postmaster is None:
            return None
        return ServerIo(self.io_account, self._postmaster_pid, self.io_account_note)

    def _postmaster_pid(self) -> int | None:
        proc = self.serving.postmaster if self.serving is not None else self.postmaster
        return proc.pid if proc is not None and proc.poll() is None else None

    def note_run(self, run_id: int) -> None:
        for lock in self._locks:
            lock.note_run(run_id)

    def stop(self) -> None:
        try:
            self._stop()
        finally:  # the directories are free for the next run once all is removed
            for lock in self._locks:
                lock.release()
            self._locks.clear()

    def _stop(self) -> None:
        try:
            if self.replica_set is not None:  # standbys first: they follow the primary
                self.replica_set.stop()
        finally:
            try:
                self._stop_serving()
            finally:
                self._stop_primary()

    def _stop_serving(self) -> None:
        """The promoted standby that became the primary at a rebuild; killed by a later
        failover, its shared memory is freed first."""
        serving = self.serving
        if serving is None:
            return
        if serving.postmaster is not None and serving.postmaster.poll() is not None:
            assert self.user is not None and self.run_dir is not None
            failover.tidy_killed(
                self.install, self.user, serving.data_dir, self.run_dir, serving.log
            )
        serving.stop()
        self.serving = None

    def _stop_primary(self) -> None:
        try:
            crashed = self.postmaster is not None and self.postmaster.poll() is not None
            self._stop_postmaster()
            if crashed and not self.keep:  # a kept cluster's next start tidies up itself
                self._tidy_after_crash()
        finally:
            # Stopped: a second stop() must not take it for a crashed server to tidy.
            self.postmaster = None
            self._remove_cgroup()
        if self.keep and self.cluster_dir.exists():
            if self.server_log and self.server_log.exists():
                shutil.copy2(self.server_log, self.cluster_dir / "server.log")
            # The socket directory goes away with the run directory; point it at the cluster.
            with (self.data_dir / "postgresql.conf").open("a") as conf:
                conf.write(conf_line("unix_socket_directories", str(self.cluster_dir)))
            if self.run_dir:
                shutil.rmtree(self.run_dir, ignore_errors=True)
            mark_kept(self.cluster_dir)  # howfast cleanup leaves it alone
            registry.forget(self.cluster_dir)
            if self.wal_cluster_dir is not None:
                registry.forget(self.wal_cluster_dir)
            return
        # Only what this object created, newest first.
        for path in reversed(self._created):
            shutil.rmtree(path, ignore_errors=True)
        self._created.clear()
        for claim in self._claims:
            claim.release()
        self._claims.clear()

    def _remove_cgroup(self) -> None:
        if self._iops_cap is not None:  # an emulated volume's cgroup outlives us: lift first
            with contextlib.suppress(HowfastError):
                self._iops_cap.set(None)
            self._iops_cap = None
        accounting, self._accounting_cgroup = self._accounting_cgroup, None
        if accounting is not None:
            self.io_cgroup = self.io_account = None
        for group in (self.cgroup, accounting):
            if group is None:
                continue
            for pid in group.pids():  # only our server's processes; none should be left
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            group.remove()
        self.cgroup = None

    def _stop_postmaster(self, first: signal.Signals | None = None) -> None:
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
        while processes_in(self.data_dir) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in processes_in(self.data_dir):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def kept_message(self) -> str | None:
        if not self.keep:
            return None
        pg_ctl = self.install.program("pg_ctl")
        return (
            f"kept the cluster in {self.cluster_dir} (stopped). Start it with: "
            f"{pg_ctl} -D {self.data_dir} -l {self.cluster_dir / 'server.log'} start"
        )
