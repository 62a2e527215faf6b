"""The server's cgroups: the memory cap (--memory), the I/O cgroup its own I/O is counted in
(machine/serverio.py) and the IOPS cap the cap-iops events set on it."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from howfast.errors import HowfastError, UsageError
from howfast.machine.cgroup import CgroupSupport, IoCgroup, MemoryCgroup, detect
from howfast.machine.memory import cap_problem
from howfast.machine.serverio import IoAccount, open_accounting
from howfast.model import JSONValue
from howfast.targets.iocap import IopsCap
from howfast.targets.leftovers import registry


class ServerCgroups:
    def __init__(self, memory_limit: int | None, token: str, settings: Mapping[str, str]) -> None:
        self.memory_limit = memory_limit
        self.settings = settings  # the user's, which the cap must hold
        self.token = token
        self.support: CgroupSupport | None = None
        self.cgroup: MemoryCgroup | None = None
        # I/O limits set by whoever built the storage (an emulated volume, a fleet); not ours
        # to remove
        self.io_cgroup: IoCgroup | None = None
        # Where PostgreSQL's own I/O is counted; the cgroup made for it (no limits) is ours
        # to remove at stop.
        self.io_account: IoAccount | None = None
        self.io_account_note: str | None = None
        self._accounting: IoCgroup | None = None
        self._iops_cap: IopsCap | None = None  # cap-iops events, on the accounting cgroup

    def check_memory_limit(self) -> None:
        """Refuse --memory before anything runs when it cannot be honoured."""
        if self.memory_limit is None:
            return
        support = detect()
        if support.version is None:
            raise UsageError(
                f"--memory needs a cgroup memory controller: {support.reason}",
                "run howfast as root on a machine with cgroups, or drop --memory",
            )
        problem = cap_problem(self.memory_limit, dict(self.settings))
        if problem:
            raise UsageError(
                problem,
                "raise --memory, or lower the settings, e.g. --set shared_buffers=16MB "
                "--set maintenance_work_mem=8MB",
            )
        self.support = support

    def create(self, data_dir: Path, disks: list[str]) -> str | None:
        """The memory cgroup (--memory), then always an I/O cgroup for the server, so its own
        I/O can be told from the device's. A warning when its I/O cannot be counted."""
        if self.memory_limit is not None:
            if self.support is None:
                self.check_memory_limit()
            assert self.support is not None
            self.cgroup = MemoryCgroup(self.support, f"howfast-{self.token}", self.memory_limit)
            self.cgroup.create()  # removed by stop(), which the runner calls whatever happens
            registry.own_cgroup(self.cgroup.path, data_dir)
        found = open_accounting(f"howfast-io-{self.token}", self.cgroup, self.io_cgroup, disks)
        self.io_account, self.io_account_note = found.account, found.warning
        if found.created is not None:
            self._accounting = self.io_cgroup = found.created
            registry.own_cgroup(found.created.path, data_dir)
        return found.warning

    def spawn(self, launch: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        """In the --memory (and I/O) cgroup, every server process is born inside it."""
        start = launch
        for group in (self.cgroup, self.io_cgroup):
            if group is not None:
                start = functools.partial(group.spawn, start)
        return start()

    def cap_iops(self, iops: int | None, disks: Callable[[], list[str]]) -> Mapping[str, JSONValue]:
        if self.io_account is None:
            raise HowfastError(
                f"the server has no I/O cgroup to cap: {self.io_account_note or 'none was made'}"
            )
        if self._iops_cap is None:
            self._iops_cap = IopsCap(self.io_account, disks())
        return self._iops_cap.set(iops)

    def iops_since(self, t: float) -> float | None:
        return self._iops_cap.iops_since(t) if self._iops_cap is not None else None

    def remove(self) -> None:
        if self._iops_cap is not None:  # an emulated volume's cgroup outlives us: lift first
            with contextlib.suppress(HowfastError):
                self._iops_cap.set(None)
            self._iops_cap = None
        accounting, self._accounting = self._accounting, None
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

    def device_record(self) -> dict[str, object]:
        if self.cgroup is None:
            return {}
        return {
            "memory_limit_bytes": self.cgroup.limit_bytes,
            "memory_cgroup": {"version": self.cgroup.version, "path": str(self.cgroup.path)},
        }
