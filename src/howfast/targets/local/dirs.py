"""The storage part of a local target: the directories the cluster lives in and the ones it
locks, claims and creates, and what a storage layer built under them (an emulated volume)
provides.

Layout: the data (and WAL, unless --wal-dir) live on the storage under test in
`<target>/howfast-<token>/`; the socket, server log and pgbench logs live in a private run
directory on another filesystem (tmpfs when available), so they add no I/O to the storage
being measured.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Protocol

from howfast.hosts.base import Host
from howfast.machine.cgroup import IoCgroup
from howfast.machine.fsinfo import describe_path, same_filesystem, whole_disk_number
from howfast.targets.claim import Claim, check_directory, claim_directory
from howfast.targets.dirlock import DirectoryLock, lock_directory
from howfast.targets.leftovers import registry
from howfast.targets.leftovers.marks import mark_kept, write_owner
from howfast.targets.local.earlier import check_earlier_clusters
from howfast.targets.local_server import conf_line, runtime_base
from howfast.targets.osuser import OsUser, check_reachable


class StorageLayer(Protocol):
    """Storage howfast builds under the cluster directory (an emulated volume): checked
    before the run, built at start (then the cluster is made on it), taken down at stop."""

    def cluster_root(self) -> Path:
        """Where the cluster's directory goes, on it (its mount point)."""

    def check_inputs(self) -> None:
        """Read only: its options and directory (before a run and its dry run alike)."""

    def check(self) -> list[str]:
        """Locks its directory and refuses what cannot be built; warnings."""

    def build(self) -> list[str]:
        """Builds it; warnings (what it was measured to add, for one)."""

    def io_cgroup(self) -> IoCgroup | None:
        """The cgroup whose I/O limits it set, where the server is born; not ours to remove."""

    def host(self) -> Host:
        """This machine, as the tools run on the storage see it."""

    def device_record(self) -> dict[str, object]:
        """What the target's record says of it, besides the cluster's devices."""

    def planned(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """What build() runs, for --dry-run."""

    def undelay(self) -> None:
        """Nothing waits out an added delay from now on (stop)."""

    def teardown(self) -> None:
        """Everything it built, its claim and its lock, whatever happened."""

    def note_run(self, run_id: int) -> None:
        """The run holding its directory's lock."""


class ClusterDirs:
    """`directory/howfast-<token>/data` (and `wal_root/howfast-<token>/pg_wal`) and the
    private run directory; the locks (one run at a time per directory), the claims and what
    was created, removed at stop unless kept."""

    def __init__(self, directory: Path, wal_root: Path | None, token: str) -> None:
        self.directory = directory.absolute()
        self.wal_root = wal_root.absolute() if wal_root else None
        self.token = token
        self.cluster_dir = self.directory / f"howfast-{token}"
        self.data_dir = self.cluster_dir / "data"
        self.wal_cluster_dir = self.wal_root / f"howfast-{token}" if self.wal_root else None
        self.run_dir: Path | None = None
        self._claims: list[Claim] = []
        self._locks: list[DirectoryLock] = []
        self._created: list[Path] = []

    def check_inputs(self) -> None:
        check_directory(self.directory, "target directory")
        if self.wal_root:
            check_directory(self.wal_root, "WAL directory")

    def lock_and_scan(self) -> list[str]:
        """Lock the directories, then refuse (or warn of) what earlier runs left there."""
        if not self._locks:  # before looking for servers: a live run's are not "earlier"
            self._locks.append(lock_directory(self.directory, "target directory"))
        warnings = check_earlier_clusters(self.directory, "target directory")
        if self.wal_root:
            if len(self._locks) < 2:
                self._locks.append(lock_directory(self.wal_root, "WAL directory"))
            warnings += check_earlier_clusters(self.wal_root, "WAL directory")
        return warnings

    def lock(self, directory: Path, role: str) -> None:
        self._locks.append(lock_directory(directory, role))

    def claim(self, directory: Path) -> None:
        self._claims.append(claim_directory(directory))

    def check_reachable(self, user: OsUser) -> None:
        check_reachable(user, self.directory)
        if self.wal_root:
            check_reachable(user, self.wal_root)

    def under_test(self) -> list[Path]:
        return [self.directory] + ([self.wal_root] if self.wal_root else [])

    def create(self, user: OsUser, also_avoid: list[Path]) -> list[str]:
        """The cluster directory, the private run directory (away from `also_avoid` too) and
        the WAL's; warnings."""
        warnings = []
        self.claim(self.directory)
        self._make_owned_dir(self.cluster_dir, "cluster", user)
        avoid = self.under_test()
        avoid += [d for d in also_avoid if d not in avoid]
        base = runtime_base(avoid)
        if any(same_filesystem(base, p) for p in avoid):
            warnings.append(
                f"the run directory {base} is on the storage under test: the server log "
                "and pgbench's logs add I/O to what is measured"
            )
        self.run_dir = Path(tempfile.mkdtemp(prefix=f"howfast-run-{self.token}-", dir=base))
        self._created.append(self.run_dir)
        write_owner(self.run_dir, directories=avoid, token=self.token)  # for howfast cleanup
        registry.own_directory(self.run_dir, "private")
        if user.uid != os.geteuid():
            os.chown(self.run_dir, user.uid, user.gid)
        if self.wal_root and self.wal_cluster_dir:
            self.claim(self.wal_root)
            self._make_owned_dir(self.wal_cluster_dir, "wal", user)
        return warnings

    def _make_owned_dir(self, path: Path, role: str, user: OsUser) -> None:
        registry.own_directory(path, role)  # before it exists: a kill at any moment finds it
        path.mkdir(mode=0o700)
        self._created.append(path)
        if user.uid != os.geteuid():
            os.chown(path, user.uid, user.gid)

    def planned_socket_dir(self) -> Path:
        """The private run directory start() makes, for --dry-run."""
        avoid = [next(p for p in (d, *d.parents) if p.exists()) for d in self.under_test()]
        return runtime_base(avoid) / f"howfast-run-{self.token}-XXXXXXXX"

    def disks(self) -> list[str]:
        """The whole disks (MAJ:MIN) under the data and the WAL."""
        paths = [self.data_dir] + ([self.wal_cluster_dir] if self.wal_cluster_dir else [])
        return [d for d in map(whole_disk_number, paths) if d is not None]

    def storage_paths(self) -> dict[str, Path]:
        if not self.data_dir.exists():
            return {}
        wal = (self.wal_cluster_dir or self.data_dir) / "pg_wal"
        return {"data": self.data_dir, "wal": wal if wal.exists() else self.data_dir}

    def device_record(self) -> dict[str, object]:
        device: dict[str, object] = {}
        if self.data_dir.exists():
            device["data"] = describe_path(self.data_dir)
            wal = self.wal_cluster_dir or self.data_dir
            device["wal"] = describe_path(wal)
            device["wal_on_data_device"] = same_filesystem(wal, self.data_dir)
        return device

    def scratch_dir(self) -> Path | None:
        return self.cluster_dir if self.cluster_dir.exists() else None

    def keep(self, server_log: Path | None) -> None:
        """The stopped cluster left for the user, its log beside it, howfast cleanup told."""
        if server_log and server_log.exists():
            shutil.copy2(server_log, self.cluster_dir / "server.log")
        # The socket directory goes away with the run directory; point it at the cluster.
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(conf_line("unix_socket_directories", str(self.cluster_dir)))
        if self.run_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        mark_kept(self.cluster_dir)  # howfast cleanup leaves it alone
        registry.forget(self.cluster_dir)
        if self.wal_cluster_dir is not None:
            registry.forget(self.wal_cluster_dir)

    def remove(self) -> None:
        """Only what this object created, newest first."""
        for path in reversed(self._created):
            shutil.rmtree(path, ignore_errors=True)
        self._created.clear()
        for claim in self._claims:
            claim.release()
        self._claims.clear()

    def note_run(self, run_id: int) -> None:
        for lock in self._locks:
            lock.note_run(run_id)

    def release_locks(self) -> None:
        for lock in self._locks:
            lock.release()
        self._locks.clear()
