"""A fleet on Kubernetes: each instance its own pod on its own claim, of the StorageClass its
class names (or the target's), all in one namespace and driven by one howfast process.

The cluster, not howfast, enforces a class's limits there (provisioned IOPS of a cloud disk,
a VolumeAttributesClass): howfast records the class's provisioner and parameters, and says
that it cannot verify enforcement from outside the node. Limits that howfast itself would
set (iops, bps, weight: cgroups on this machine) are refused on k8s:// targets.
"""

from __future__ import annotations

from dataclasses import replace

from howfast.errors import UsageError
from howfast.model import JSONValue, TargetRecord
from howfast.plans.fleet import FleetClass, FleetScenario
from howfast.targets.fleet_base import FleetInstance
from howfast.targets.k8s.cluster import Cluster
from howfast.targets.k8s.spec import K8sOptions, K8sSpec, VolumeSpec
from howfast.targets.k8s.target import K8sTarget

NOT_VERIFIABLE = (
    "set by the StorageClass; howfast cannot verify from outside the node that it holds "
    "(compare the classes' IOPS and latency)"
)


def member_spec(target: K8sSpec, klass: FleetClass) -> K8sSpec:
    """The class's StorageClass (and attributes class) for data; the target's otherwise."""
    if klass.storage_class is None:
        return target
    data = VolumeSpec(klass.storage_class, attributes_class=klass.volume_attributes_class)
    return replace(target, data=data)


class K8sFleetMember(K8sTarget, FleetInstance):
    def __init__(
        self,
        spec: K8sSpec,
        options: K8sOptions,
        *,
        name: str,
        scenario: str,
        klass: str,
        index: int,
        settings: dict[str, str],
        checksums: bool = False,
    ) -> None:
        super().__init__(spec, options, settings=settings, checksums=checksums, name=name)
        self.scenario = scenario
        self.klass = klass
        self.index = index

    def fleet_params(self) -> dict[str, JSONValue]:
        data = self.spec.data
        params: dict[str, JSONValue] = {
            **self.identity(),
            "storage_class": data.storage_class or f"emptyDir{data.medium}",
        }
        if data.attributes_class:
            params["volume_attributes_class"] = data.attributes_class
        return params

    def record(self) -> TargetRecord:
        record = super().record()
        data = self.spec.data
        record.device["fleet"] = {
            **self.identity(),
            "storage_class": data.storage_class,
            "volume_attributes_class": data.attributes_class,
            "limits": NOT_VERIFIABLE,
        }
        return record


def check_classes(scenarios: list[FleetScenario]) -> None:
    """Refuse limits howfast would have to enforce itself: the cluster enforces them here."""
    for klass in (c for s in scenarios for c in s.classes):
        limits = klass.limits()
        if limits.caps or limits.weight:
            raise UsageError(
                f"fleet class {klass.name} ({limits.describe()}): on a k8s:// target "
                "howfast cannot cap a pod's I/O; the cluster does, through the class's "
                "StorageClass",
                "give the class a storage_class (and volume_attributes_class) instead",
            )


class K8sFleet:
    """A fleet's place on a cluster: one namespace, one API client shared by the instances."""

    def __init__(
        self,
        spec: K8sSpec,
        options: K8sOptions,
        *,
        settings: dict[str, str],
        checksums: bool = False,
    ) -> None:
        self.spec = spec
        self.options = options
        self.settings = settings
        self.checksums = checksums
        self.cluster: Cluster | None = None
        self.description = spec.text

    def check_plan(self, scenarios: list[FleetScenario]) -> None:
        check_classes(scenarios)

    def check(self, scenarios: list[FleetScenario]) -> None:
        check_classes(scenarios)
        self._check_cluster(scenarios)

    def _check_cluster(self, scenarios: list[FleetScenario]) -> None:
        self.cluster = Cluster(self.options.context)
        checked: set[str | None] = set()
        for scenario in scenarios:  # one check per distinct StorageClass, as a target would
            for member in self.members(scenario, planned=True):
                assert isinstance(member, K8sTarget)
                if member.spec.data.storage_class in checked:
                    continue
                checked.add(member.spec.data.storage_class)
                member.cluster = self.cluster
                member.check(will_init=True)

    def open(self) -> None:
        """Nothing to claim: every instance's objects carry their own run label."""

    def close(self) -> None:
        """Nothing to release: each instance deleted its objects when it stopped."""

    def members(self, scenario: FleetScenario, *, planned: bool = False) -> list[FleetInstance]:
        out: list[FleetInstance] = []
        for klass in scenario.classes:
            for n in range(1, klass.count + 1):
                member = K8sFleetMember(
                    member_spec(self.spec, klass),
                    self.options,
                    name=f"{self.spec.text} {scenario.name}/{klass.name}-{n}",
                    scenario=scenario.name,
                    klass=klass.name,
                    index=n,
                    settings=self.settings,
                    checksums=self.checksums,
                )
                if not planned:
                    member.cluster = self.cluster  # one client for all of them
                out.append(member)
        return out

    def prepare(self, member: FleetInstance) -> None:
        """Nothing: start() creates the instance's objects."""

    def discard(self, member: FleetInstance) -> None:
        """Nothing: stop() deleted them and waited until they were gone."""
