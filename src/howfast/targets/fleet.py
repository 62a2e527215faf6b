"""The instances of a fleet: one throwaway cluster each, in its own subdirectory of the
target directory, with its own port and its own I/O cgroup on the device behind the target
(the class's limits, or none: the cgroup still counts what the instance did).

    place = LocalFleet(directory, install, settings=..., checksums=False)
    place.check(scenarios)                  # refuses limits this machine cannot enforce
    place.open()                            # claims the directory, makes the workspace
    for member in place.members(scenario):  # FleetMember: a LocalTarget in its own cgroup
        place.prepare(member); member.start() ... member.stop(); place.discard(member)
    place.close()
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from howfast.errors import UsageError
from howfast.iolimits import (
    IoCounters,
    IoLimits,
    scheduler_of,
    throttle_lines,
    weight_problem,
)
from howfast.machine.cgroup import CgroupSupport, IoCgroup, detect_io
from howfast.machine.fsinfo import describe_path
from howfast.machine.pgbin import PgInstall
from howfast.model import JSONValue, TargetRecord
from howfast.plans.fleet import FleetScenario
from howfast.targets.base import Connection
from howfast.targets.claim import Claim, check_directory, claim_directory
from howfast.targets.dirlock import DirectoryLock, lock_directory
from howfast.targets.fleet_base import FleetInstance
from howfast.targets.leftovers import registry
from howfast.targets.local import LocalOptions, LocalTarget, check_earlier_clusters
from howfast.targets.osuser import check_reachable, server_user


@dataclass(frozen=True)
class FleetDevice:
    """The whole disk behind the target directory: where class limits apply."""

    disk: str
    devnum: str  # 'major:minor' of the whole disk, as the I/O controller wants it
    scheduler: str | None


def fleet_device(directory: Path, sys_root: Path = Path("/sys")) -> FleetDevice | str:
    """The disk to put limits on, or why there is none (tmpfs, an unknown device)."""
    device = describe_path(directory).get("device")
    disk = device.get("disk") if isinstance(device, dict) else None
    if not isinstance(disk, str):
        return f"no block device behind {directory} (a memory or virtual filesystem)"
    try:
        devnum = (sys_root / "block" / disk / "dev").read_text().strip()
    except OSError:
        return f"cannot read the device number of {disk}"
    return FleetDevice(disk, devnum, scheduler_of(disk, sys_root))


def limits_problem(
    limits: IoLimits, device: FleetDevice | str, support: CgroupSupport
) -> str | None:
    """Why a class's limits cannot be enforced here, or None: refused before the run."""
    if not limits.caps and not limits.weight:
        return None
    if isinstance(device, str):
        return device
    if support.version is None:
        return f"no cgroup I/O controller: {support.reason}"
    if limits.weight:
        return weight_problem(device.disk, device.scheduler)
    return None


class FleetMember(LocalTarget, FleetInstance):
    """One instance of a fleet: a LocalTarget born in its own I/O cgroup."""

    def __init__(
        self,
        directory: Path,
        install: PgInstall,
        *,
        options: LocalOptions,
        scenario: str,
        klass: str,
        index: int,
        limits: IoLimits,
        device: FleetDevice | None,
        support: CgroupSupport,
        settings: dict[str, str],
    ) -> None:
        """`options`: the instance's name and checksums (a fleet takes no other)."""
        super().__init__(directory, install, settings=settings, options=options)
        self.scenario = scenario
        self.klass = klass
        self.index = index
        self.limits = limits
        self.device = device
        self.support = support

    def start(self) -> Connection:
        if self.device is not None and self.support.version is not None:
            lines = throttle_lines(self.support.version, self.device.devnum, self.limits)
            group = IoCgroup(self.support, f"howfast-fleet-{secrets.token_hex(4)}", lines)
            group.create()  # removed by stop(), which runs whatever happens
            registry.own_cgroup(group.path)
            # Its counters count on cgroup v1 too: LocalTarget.start turns counting on.
            self.cgroups.io_cgroup = group
        return super().start()

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            if self.cgroups.io_cgroup is not None:
                self.cgroups.io_cgroup.remove()
                self.cgroups.io_cgroup = None

    def fleet_params(self) -> dict[str, JSONValue]:
        limits = {k: v for k, v in vars(self.limits).items() if v}
        return {
            **self.identity(),
            **({"io_limits": limits} if limits else {}),
        }

    def counters(self) -> IoCounters | None:
        """What this instance's server has asked of the device so far (None: not counted)."""
        if self.cgroups.io_cgroup is None or self.device is None:
            return None
        return self.cgroups.io_cgroup.counters(self.device.devnum)

    def record(self) -> TargetRecord:
        record = super().record()
        record.device["fleet"] = {
            **self.identity(),
            "limits": {k: v for k, v in vars(self.limits).items() if v},
            "limits_device": self.device.devnum if self.device else None,
            "cgroup": str(self.cgroups.io_cgroup.path) if self.cgroups.io_cgroup else None,
        }
        return record


class LocalFleet:
    """A fleet's place on a local directory: its instances in a workspace inside it."""

    def __init__(
        self,
        directory: Path,
        install: PgInstall,
        *,
        settings: dict[str, str],
        checksums: bool = False,
        token: str | None = None,
    ) -> None:
        self.directory = directory.absolute()
        self.description = str(self.directory)
        self.install = install
        self.settings = settings
        self.checksums = checksums
        self.workspace = self.directory / f"howfast-fleet-{token or secrets.token_hex(4)}"
        self.device: FleetDevice | None = None
        self._claim: Claim | None = None
        self._lock: DirectoryLock | None = None

    def check_plan(self, scenarios: list[FleetScenario]) -> None:
        """A class with a StorageClass is for k8s:// targets; and the directory, read only,
        so that a dry run refuses it as the run does (issue 35: a missing one was a
        traceback in the dry run)."""
        check_directory(self.directory, "target directory")
        for klass in (c for s in scenarios for c in s.classes):
            if klass.on_kubernetes:
                raise UsageError(
                    f"fleet class {klass.name}: storage_class applies to k8s:// targets only",
                    "give the class I/O limits (iops, read_iops, ...) on a directory target",
                )

    def check(self, scenarios: list[FleetScenario]) -> None:
        self.check_plan(scenarios)
        if self._lock is None:  # one run at a time, as on a single target's directory; and
            # while it is held, howfast cleanup knows the fleet's workspace is in use
            self._lock = lock_directory(self.directory, "target directory")
        check_earlier_clusters(self.directory, "target directory")
        check_reachable(server_user(), self.directory)
        self.device = check_fleet_limits(
            [(c.name, c.limits()) for s in scenarios for c in s.classes], self.directory
        )

    def open(self) -> None:
        self._claim = claim_directory(self.directory)
        registry.own_directory(self.workspace, "fleet")  # before it exists: howfast cleanup
        self.workspace.mkdir(mode=0o755)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.workspace.rmdir()
        if self._claim is not None:
            self._claim.release()
            self._claim = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def members(self, scenario: FleetScenario, *, planned: bool = False) -> list[FleetInstance]:
        device = self.device
        if planned:
            found = fleet_device(self.directory)
            device = None if isinstance(found, str) else found
        return list(scenario_members(
            self.workspace, self.directory, scenario, self.install,
            device=device, settings=self.settings, checksums=self.checksums,
        ))  # fmt: skip

    def prepare(self, member: FleetInstance) -> None:
        assert isinstance(member, FleetMember)
        member.directory.mkdir(mode=0o755)

    def discard(self, member: FleetInstance) -> None:
        assert isinstance(member, FleetMember)
        shutil.rmtree(member.directory, ignore_errors=True)


def check_fleet_limits(classes: list[tuple[str, IoLimits]], directory: Path) -> FleetDevice | None:
    """Refuse, before anything is created, a class limit that cannot be enforced here."""
    device = fleet_device(directory)
    support = detect_io()
    for name, limits in classes:
        problem = limits_problem(limits, device, support)
        if problem:
            raise UsageError(
                f"fleet class {name} ({limits.describe()}) cannot be enforced: {problem}",
                "drop the class's limits, or run where they can be (root, cgroups, a disk)",
            )
    return None if isinstance(device, str) else device


def scenario_members(
    workspace: Path,
    directory: Path,
    scenario: FleetScenario,
    install: PgInstall,
    *,
    device: FleetDevice | None,
    settings: dict[str, str],
    checksums: bool,
) -> list[FleetMember]:
    """The instances of one scenario, class by class, in `workspace` (not created here)."""
    support = detect_io()
    return [
        FleetMember(
            workspace / f"{scenario.name}-{klass.name}-{n}",
            install,
            options=LocalOptions(
                checksums=checksums, name=f"{directory} {scenario.name}/{klass.name}-{n}"
            ),
            scenario=scenario.name,
            klass=klass.name,
            index=n,
            limits=klass.limits(),
            device=device,
            support=support,
            settings=settings,
        )
        for klass in scenario.classes
        for n in range(1, klass.count + 1)
    ]
