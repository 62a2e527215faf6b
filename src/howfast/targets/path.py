"""A directory probed without PostgreSQL: `howfast probe DIR` runs fio and pg_test_fsync in it.

The same ownership rules as a local target (targets/claim.py): the directory must exist and be
empty or carry howfast's marker. Probe files go in a `howfast-<token>` subdirectory that this
target creates and removes, so nothing else in the directory is ever touched.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

from howfast.hosts.base import Host
from howfast.hosts.local import LocalHost
from howfast.machine.fsinfo import describe_path
from howfast.machine.pgbin import PgInstall
from howfast.model import TargetRecord
from howfast.targets.base import Connection, PlannedTarget, Target
from howfast.targets.capabilities import HasStorage, HoldsDirectoryLock, Keepable
from howfast.targets.claim import Claim, check_directory, claim_directory
from howfast.targets.dirlock import DirectoryLock, lock_directory
from howfast.targets.leftovers import registry
from howfast.targets.leftovers.marks import mark_kept


class PathTarget(Target, HasStorage, HoldsDirectoryLock, Keepable):
    kind = "path"

    def __init__(
        self,
        directory: Path,
        *,
        install: PgInstall | None = None,
        keep: bool = False,
        name: str | None = None,
    ) -> None:
        self.directory = directory.absolute()
        self.install = install  # pg_test_fsync's
        self.keep = keep
        self.name = name or str(self.directory)
        self.probe_dir = self.directory / f"howfast-{secrets.token_hex(4)}"
        self._claim: Claim | None = None
        self._lock: DirectoryLock | None = None  # one run or probe at a time per directory
        self._created = False

    def check_inputs(self) -> None:
        """The directory (existing, writable, empty or howfast's), read only: before a probe
        and its --dry-run alike (targets/base.py)."""
        check_directory(self.directory, "probe directory")

    def check(self, *, will_init: bool) -> None:
        self.check_inputs()
        if self._lock is None:
            self._lock = lock_directory(self.directory, "probe directory")

    def note_run(self, run_id: int) -> None:
        if self._lock is not None:
            self._lock.note_run(run_id)

    def start(self) -> Connection | None:
        self._claim = claim_directory(self.directory)
        registry.own_directory(self.probe_dir, "probe")  # before it exists: howfast cleanup
        self.probe_dir.mkdir(mode=0o700)
        self._created = True
        return None  # no server: only storage probes run here

    def host(self) -> Host:
        """This machine, with PostgreSQL's programs from the target's install."""
        return LocalHost(self.install)

    def planned(self) -> PlannedTarget:
        return PlannedTarget(host=self.host(), connection=None, scratch_dir=self.probe_dir)

    def record(self) -> TargetRecord:
        where = self.probe_dir if self.probe_dir.exists() else self.directory
        return TargetRecord(
            name=self.name,
            kind=self.kind,
            device={"data": describe_path(where)},
            location=str(self.directory),
        )

    def scratch_dir(self) -> Path | None:
        return self.probe_dir if self.probe_dir.exists() else None

    def storage_paths(self) -> dict[str, Path]:
        scratch = self.scratch_dir()
        return {"data": scratch} if scratch is not None else {}

    def stop(self) -> None:
        try:
            self._stop()
        finally:  # the directory is free for the next run once its files are removed
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def _stop(self) -> None:
        if self.keep:
            mark_kept(self.probe_dir)
            registry.forget(self.probe_dir)
            return
        if self._created:
            shutil.rmtree(self.probe_dir, ignore_errors=True)
            self._created = False
        if self._claim is not None:
            self._claim.release()
            self._claim = None

    def kept_message(self) -> str | None:
        if not self.keep or not self.probe_dir.exists():
            return None
        return (
            f"kept {self.probe_dir} and the directory's ownership marker; "
            "the probe files themselves are always removed"
        )
