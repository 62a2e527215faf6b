"""What a fleet runner needs of a place to run instances (a directory, a Kubernetes namespace)
and of each instance. One implementation per target kind: targets/fleet.py (local
directories, limits through cgroups) and targets/k8s/fleet.py (pods, classes as StorageClasses).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING, Protocol

from howfast.targets.base import Target

if TYPE_CHECKING:
    from howfast.iolimits import IoCounters
    from howfast.model import JSONValue
    from howfast.plans.fleet import FleetScenario


class FleetInstance(Target):
    """One instance: a target that also knows its scenario, class and number. Mixed into a
    target kind's class (FleetMember(LocalTarget, FleetInstance))."""

    name: str
    scenario: str
    klass: str
    index: int

    @abstractmethod
    def fleet_params(self) -> dict[str, JSONValue]:
        """What each step of the instance adds to its params (scenario, class, instance, and
        the limits asked or the StorageClass that sets them)."""

    def identity(self) -> dict[str, JSONValue]:
        """Which instance this is, first in its params and in its record's `fleet`."""
        return {"scenario": self.scenario, "class": self.klass, "instance": self.index}

    def counters(self) -> IoCounters | None:
        """The instance's own I/O so far; None where howfast cannot count it."""
        return None


class FleetPlace(Protocol):
    """Where a fleet's instances live, claimed for the run and released after it."""

    description: str

    def check_plan(self, scenarios: list[FleetScenario]) -> None:
        """What can be refused from the plan and what can be read alone, before a dry run
        too (a class this place cannot give its instances, a directory that cannot be used);
        touches nothing."""

    def check(self, scenarios: list[FleetScenario]) -> None:
        """Everything that can be refused before the run exists (a limit that cannot be
        enforced here, a StorageClass the cluster does not have)."""

    def open(self) -> None:
        """Claim the place for the run (before the first instance is made)."""

    def close(self) -> None:
        """Release it (after every instance is gone), whatever happened."""

    def members(self, scenario: FleetScenario, *, planned: bool = False) -> list[FleetInstance]:
        """The scenario's instances, not started. `planned`: for --dry-run, nothing touched."""
        ...

    def prepare(self, member: FleetInstance) -> None:
        """Before the member starts (a local instance's directory)."""

    def discard(self, member: FleetInstance) -> None:
        """After the member stopped, whatever happened."""
