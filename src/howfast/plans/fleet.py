"""A plan's `[fleet]`: many instances of one target at once, in classes with I/O limits, in
one or more scenarios compared in one run (docs/plans/format.md#fleet).

    [fleet]
    classes = [
      { name = "high", count = 2, read_iops = 2000, write_iops = 2000 },
      { name = "best-effort", count = 6 },
    ]

or several `[[fleet.scenarios]]`, each with a `name` and its `classes`. On a k8s:// target a
class names its `storage_class` (and optionally a `volume_attributes_class`) instead of limits:
the cluster, not howfast, enforces them there.
"""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from howfast.iolimits import IoLimits
from howfast.plugin.fields import PositiveInt, Size, conflict, no_duplicates

Name = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,30}$")]
# DNS-1123 subdomain, as Kubernetes names StorageClasses and VolumeAttributesClasses
KubeName = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")]
MAX_INSTANCES = 256


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class FleetClass(_Strict):
    """`count` instances with the same I/O limits on the device behind the target."""

    name: Name
    count: PositiveInt = 1
    iops: PositiveInt | None = None  # read and write, each
    read_iops: PositiveInt | None = None
    write_iops: PositiveInt | None = None
    bps: Size | None = None  # read and write bytes/s, each
    read_bps: Size | None = None
    write_bps: Size | None = None
    weight: Annotated[int, Field(ge=1, le=1000)] | None = None  # a share, under bfq only
    storage_class: KubeName | None = None  # k8s:// targets: the class's volumes
    volume_attributes_class: KubeName | None = None  # k8s:// targets, with storage_class

    @model_validator(mode="after")
    def _one_spelling(self) -> Self:
        if self.iops is not None and (self.read_iops or self.write_iops):
            raise conflict("iops", "give iops or read_iops/write_iops, not both")
        if self.bps is not None and (self.read_bps or self.write_bps):
            raise conflict("bps", "give bps or read_bps/write_bps, not both")
        if self.volume_attributes_class and not self.storage_class:
            raise conflict(
                "volume_attributes_class", "a VolumeAttributesClass needs its storage_class"
            )
        return self

    @property
    def on_kubernetes(self) -> bool:
        return self.storage_class is not None

    def describe(self) -> str:
        """What sets the class apart: its limits, or its StorageClass."""
        if self.storage_class:
            vac = self.volume_attributes_class
            return f"StorageClass {self.storage_class}" + (f", attributes {vac}" if vac else "")
        return self.limits().describe()

    def limits(self) -> IoLimits:
        return IoLimits(
            read_iops=self.read_iops or self.iops,
            write_iops=self.write_iops or self.iops,
            read_bps=self.read_bps or self.bps,
            write_bps=self.write_bps or self.bps,
            weight=self.weight,
        )


Classes = Annotated[list[FleetClass], Field(min_length=1)]


def _distinct_names(classes: list[FleetClass]) -> list[FleetClass]:
    no_duplicates([c.name for c in classes])
    return classes


class FleetScenario(_Strict):
    name: Name
    classes: Classes

    @field_validator("classes")
    @classmethod
    def _distinct(cls, classes: list[FleetClass]) -> list[FleetClass]:
        return _distinct_names(classes)

    @property
    def instances(self) -> int:
        return sum(c.count for c in self.classes)


class FleetSection(_Strict):
    classes: Classes | None = None  # one scenario, named "classes"
    scenarios: Annotated[list[FleetScenario], Field(min_length=1)] | None = None

    @field_validator("classes")
    @classmethod
    def _distinct(cls, classes: list[FleetClass] | None) -> list[FleetClass] | None:
        return None if classes is None else _distinct_names(classes)

    @model_validator(mode="after")
    def _classes_or_scenarios(self) -> Self:
        if (self.classes is None) == (self.scenarios is None):
            raise conflict(None, "give classes (one scenario) or scenarios, one of the two")
        if self.scenarios is not None:
            no_duplicates([s.name for s in self.scenarios])
        for scenario in self.all_scenarios():
            if scenario.instances > MAX_INSTANCES:
                raise conflict(
                    None, f"scenario {scenario.name}: {scenario.instances} instances, at most "
                    f"{MAX_INSTANCES}"
                )  # fmt: skip
        return self

    def all_scenarios(self) -> list[FleetScenario]:
        if self.scenarios is not None:
            return list(self.scenarios)
        assert self.classes is not None
        return [FleetScenario(name="classes", classes=self.classes)]
