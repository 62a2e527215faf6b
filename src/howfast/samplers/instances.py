"""(issue 37) Every instance of a design an operator runs (`cnpg://`, HasInstances), each
with its own I/O split into its WAL volume and its data volume, and its container's CPU:
the figures of container_io.py's ContainerServerSampler, one per instance, read through the
instance's pod (by exec: its container's cgroup and its processes). A pod the operator
makes again (a failover, a delete-pod event) is followed: a reading that fails, or that
finds another server under the pod's name (ServerReplaced: another postmaster PID or start
time), asks the target for its instances again and starts a new reader on the new pod, whose
series go on under the same name (a gap over the outage; counters are not compared across
pods).

Series: `instances.<name>.pgio.<role>.<x>` (role: data, wal; x as pgio's) and
`instances.<name>.cpu.server_container_pct`; section `io.instances.<name>`."""

from __future__ import annotations

from howfast.errors import HowfastError
from howfast.model import JSONValue, Sample
from howfast.samplers.base import PeriodicSampler, SamplerContext, SamplerResult
from howfast.samplers.container_io import ContainerServerSampler
from howfast.samplers.plugin import SamplerPlugin, SamplerSetup
from howfast.targets.capabilities import HasInstances, InstanceView

PREFIX = "instances"
FOLLOW_EVERY_S = 5.0  # an instance missing is looked for again this often (an API call)


def reader(view: InstanceView) -> ContainerServerSampler | None:
    """A ContainerServerSampler on one instance, its roles' devices read in its pod (WAL
    only when on a device of its own); None when its pod gives no counters."""
    counters = view.host.server_counters()
    if counters is None:
        return None
    roles = view.host.role_devices(view.paths)
    devices = {r.role: r.device for r in roles if r.device and r.shares_with is None}
    return ContainerServerSampler(counters, devices, one_server=True)


def prefixed(name: str, series: dict[str, list[Sample]]) -> dict[str, list[Sample]]:
    return {f"{PREFIX}.{name}.{key}": points for key, points in series.items()}


class InstancesSampler(PeriodicSampler):
    name = "instances"

    def __init__(self, target: HasInstances) -> None:
        super().__init__()
        self.target = target
        self.readers: dict[str, ContainerServerSampler] = {}
        self.done: dict[str, list[SamplerResult]] = {}  # readers of pods that went away
        self.problems: list[str] = []
        self.ctx: SamplerContext | None = None
        self.expected = 0  # instances at the first reading
        self.followed_at = 0.0

    def begin(self, ctx: SamplerContext) -> None:
        self.ctx = ctx
        self._follow()
        if not self.readers:
            raise RuntimeError("no instance could be read: " + "; ".join(self.problems))

    def _follow(self) -> None:
        """A reader on every instance that has none (a new pod after an event)."""
        assert self.ctx is not None
        self.followed_at = self.ctx.now()
        views = self.target.instance_views()
        self.expected = max(self.expected, len(views))
        for view in views:
            if view.name in self.readers:
                continue
            try:
                made = reader(view)
                if made is not None:
                    made.begin(self.ctx)
                    self.readers[view.name] = made
            except (HowfastError, RuntimeError, OSError) as exc:
                self.problems.append(f"{view.name}: {exc}")

    def tick(self, t: float) -> None:
        lost = []
        for name, one in self.readers.items():
            try:
                one.tick(t)
            except (HowfastError, RuntimeError, OSError):
                lost.append(name)  # its pod went away: the figures so far are kept
        for name in lost:
            self.done.setdefault(name, []).append(self.readers.pop(name).result())
        missing = len(self.readers) < self.expected and t - self.followed_at >= FOLLOW_EVERY_S
        if lost or missing:
            try:
                self._follow()
            except HowfastError as exc:  # the API, while the operator moves things
                self.problems.append(str(exc))

    def result(self) -> SamplerResult:
        out = SamplerResult()
        sections: dict[str, JSONValue] = {}
        for name, one in self.readers.items():
            self.done.setdefault(name, []).append(one.result())
        for name, parts in sorted(self.done.items()):
            pods: list[JSONValue] = []
            for part in parts:
                for key, points in prefixed(name, part.series).items():
                    out.series.setdefault(key, []).extend(points)
                pods.append((part.sections.get("io") or {}).get("postgres"))
            sections[name] = pods[-1] if len(pods) == 1 else {"pods": pods}
        out.sections["io"] = {"instances": sections}
        out.warnings += [f"instances: {p}" for p in self.problems]
        return out


def _create(setup: SamplerSetup) -> PeriodicSampler | None:
    target = setup.target
    return InstancesSampler(target) if isinstance(target, HasInstances) else None


# Every sampled step on a target whose servers an operator runs (samplers/registry.py).
SAMPLER = SamplerPlugin("instances", _create, order=26, sections=("io",))
