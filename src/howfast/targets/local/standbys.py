"""The standbys part of a local target (`--replicas N`, targets/replicas/): where each one
goes, its storage and cgroup, the replication settings of the primary, their start."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from howfast.errors import HowfastError, UsageError
from howfast.machine.pgbin import PgInstall
from howfast.model import JSONValue
from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.capabilities import StandbyMember
from howfast.targets.claim import check_directory
from howfast.targets.local.dirs import ClusterDirs
from howfast.targets.local.earlier import check_earlier_clusters
from howfast.targets.local.options import StandbyPlacement
from howfast.targets.local.server import START_TIMEOUT_S
from howfast.targets.osuser import OsUser, check_reachable
from howfast.targets.replicas.builders import (
    HBA_FIRST,
    primary_replication_settings,
    replication_address,
    replication_listen,
    replication_role_sql,
    scram_verifier,
    slot_keep_bytes,
)
from howfast.targets.replicas.local import LocalStandby, ReplicationAccess
from howfast.targets.replicas.set import ReplicaSet
from howfast.targets.replicas.spec import ReplicaSpec

Step = tuple[str, tuple[str, ...]]
# wal_sender_timeout on the primary, wal_receiver_timeout on the standbys (default 60 s): a
# replication connection that carried nothing that long (a partition) is given up on both
# sides, the walreceiver connects again (every 5 s, each try given 5 s: CONNECT_TIMEOUT_S)
# and finds the slot free, so a cut of any length streams again within about 10 s of its
# end; a short cut resumes on the same connection at TCP's next retransmission.
REPLICATION_TIMEOUT = "10s"


class LocalStandbys:
    """The standbys `spec` asks for, placed as `placement` says, built from the primary."""

    def __init__(
        self, spec: ReplicaSpec, placement: StandbyPlacement, install: PgInstall, dirs: ClusterDirs
    ) -> None:
        self.spec = spec
        self.dirs_given = [d.absolute() for d in placement.dirs]
        self.storage = placement.storage
        self.volume_root = placement.volume_root
        self.install = install
        self.dirs = dirs
        self.replica_set: ReplicaSet | None = None
        self._locked: set[Path] = set()
        # The replication role's password: in memory, and in each standby's passfile in the
        # private run directory; the server has only its SCRAM verifier.
        self._replication_password = secrets.token_urlsafe(24)

    def check_inputs(self, keep: bool) -> None:
        """The options that cannot go together and the standby directories, read only."""
        if keep:
            raise UsageError(
                "--keep keeps one cluster; a primary with standbys is removed at the end "
                "(drop --keep or --replicas)"
            )
        if len(self.dirs_given) > 1 and len(self.dirs_given) != self.spec.count:
            raise UsageError(
                f"give one --standby-dir, or one per standby ({self.spec.count}), not "
                f"{len(self.dirs_given)}"
            )
        for directory in dict.fromkeys(self.dirs_given):
            check_directory(directory, "standby directory")

    def check(self, user: OsUser) -> list[str]:
        """Refuse what standbys cannot do here before anything is created (beyond what
        check_inputs refused); lock their directories. Warnings."""
        if self.storage is not None:
            self.storage(self.dirs.directory).check()
        if not self.install.program("pg_basebackup"):
            raise HowfastError(
                f"{self.install.bindir}: missing pg_basebackup (standbys are built with it)",
                "install the PostgreSQL server: sudo apt-get install -y postgresql",
            )
        warnings = []
        for directory in dict.fromkeys(self.dirs_given):
            if directory not in (self.dirs.directory, self.dirs.wal_root, *self._locked):
                self.dirs.lock(directory, "standby directory")
                self._locked.add(directory)
                warnings += check_earlier_clusters(directory, "standby directory")
            check_reachable(user, directory)
        return warnings

    def listen_addresses(self) -> list[str]:
        """The loopback addresses the primary listens on for its standbys (one each)."""
        return replication_listen(self.spec.count)

    def hba_first(self) -> str:
        """pg_hba.conf's first lines: TCP on loopback asks for a password."""
        return HBA_FIRST

    def replication_link(self, name: str) -> str | None:
        """The loopback address standby `name` reaches its primary on; None: no such one."""
        names = self.spec.names
        return replication_address(names.index(name) + 1) if name in names else None

    def _make_replication_role(self, primary: Connection) -> None:
        verifier = scram_verifier(self._replication_password, secrets.token_bytes(16))
        with pgquery.connect(primary, timeout_s=10) as db:
            db.execute(replication_role_sql(verifier).encode())

    def other_dirs(self) -> list[Path]:
        return list(dict.fromkeys(self.dirs_given))

    def replication_settings(self) -> dict[str, str]:
        """The primary's: WAL kept for the standbys' slots, as the free space allows."""
        wal = self.dirs.wal_root or self.dirs.directory
        try:
            free = os.statvfs(wal).f_bavail * os.statvfs(wal).f_frsize
        except OSError:
            free = None
        return {
            **primary_replication_settings(self.spec, slot_keep_bytes(free)),
            "wal_sender_timeout": REPLICATION_TIMEOUT,
        }

    def member(
        self, i: int, name: str, user: OsUser, run_dir: Path, rebuilt: int = 0
    ) -> LocalStandby:
        """Standby `name` (the i-th): where it goes, its storage and cgroup. standby_i goes
        in the primary's cluster directory (removed with it), or in `--standby-dir` (one for
        all, or one each) as howfast-<its own token>: the shape of a cluster, which `howfast
        cleanup` stops and removes when a killed run left it. A standby rebuilt after a
        failover (the `rebuilt`-th time) goes where the design puts it, in a directory of its
        own: `<name>-rebuilt-<n>` in the cluster directory (the promoted one still lives in
        `<name>`), else a new `howfast-<token>` or volume, as at start."""
        parent = self.volume_root or self.dirs.directory
        if self.dirs_given:
            parent = self.dirs_given[i if len(self.dirs_given) > 1 else 0]
            root = parent / f"howfast-{secrets.token_hex(4)}"
        else:
            root = self.dirs.cluster_dir / (f"{name}-rebuilt-{rebuilt}" if rebuilt else name)
        storage = self.storage(parent) if self.storage else None
        # its own token: a cgroup a killed howfast left is found by its name's shape
        cgroup = f"howfast-standby-{secrets.token_hex(4)}"
        access = ReplicationAccess(
            replication_address(i + 1),
            tuple(self.listen_addresses()),
            self._replication_password,
            receiver_timeout=REPLICATION_TIMEOUT,
        )
        return LocalStandby(
            name,
            self.install,
            user,
            root,
            run_dir,
            cgroup_name=cgroup,
            storage=storage,
            replication=access,
        )

    def start(
        self,
        primary: Connection,
        user: OsUser,
        put_in_force: Callable[[Mapping[str, str]], None],
    ) -> None:
        for directory in dict.fromkeys(self.dirs_given):
            if directory not in (self.dirs.directory, self.dirs.wal_root):
                self.dirs.claim(directory)
        assert self.dirs.run_dir is not None
        self._make_replication_role(primary)
        members = [
            self.member(i, name, user, self.dirs.run_dir) for i, name in enumerate(self.spec.names)
        ]
        self.replica_set = ReplicaSet(self.spec, primary, members, put_in_force=put_in_force)
        self.replica_set.start(timeout_s=START_TIMEOUT_S)

    def members(self) -> Sequence[StandbyMember]:
        return list(self.replica_set.members) if self.replica_set else []

    def records(self, alive: bool) -> tuple[dict[str, JSONValue], ...]:
        """What the target's record says of each standby, with its sync state now."""
        if self.replica_set is None:
            return ()
        states = self.replica_set.sync_states() if alive else {}
        return tuple(
            {**dict(m.record()), "sync_state": states.get(m.name) or None}
            for m in self.replica_set.members
        )

    def storage_paths(self) -> dict[str, Path]:
        """The standbys' data directories, by name: on this machine, like the primary's."""
        paths: dict[str, Path] = {}
        for member in self.members():
            paths.update(member.storage_paths())
        return paths

    def wait_streaming(self, timeout_s: float, since: float) -> dict[str, JSONValue]:
        """Back once they stream again (their walreceivers retry every 5 s): how long that
        took `since` the primary accepted connections."""
        if self.replica_set is None:
            return {}
        self.replica_set.wait_streaming(timeout_s)
        return {"standbys_streaming_s": round(time.monotonic() - since, 3)}

    def planned(self, primary: Connection, user: OsUser, run_dir: Path) -> tuple[Step, ...]:
        """Each standby's base backup and server, and the design put in force."""
        steps: tuple[Step, ...] = ()
        for i, name in enumerate(self.spec.names):
            steps += self.member(i, name, user, run_dir).planned(primary)
        spec = self.spec
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

    def stop(self) -> None:
        if self.replica_set is not None:
            self.replica_set.stop()
