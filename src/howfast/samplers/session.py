"""Sampling around the steps of one target: which samplers run, and how what they saw joins
the step's outcome.

    sampling = TargetSampling(target, connection, interval_s=1.0)   # once per target
    session = sampling.start("pgbench")      # just before the workload runs
    ... workload.execute(ctx) ...            # ctx.on_tool_started = session.track_process
    session.stop()                           # in a finally
    part = session.part()                    # series, metrics, warnings, sections: the runner
                                             # joins them to the step's outcome
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from howfast.hosts.base import Host
from howfast.machine.devices import RoleDevice, resolve_roles
from howfast.model import JSONValue, Sample
from howfast.samplers.base import Sampler, SamplerContext, SamplerResult, describe_failure
from howfast.samplers.cpu import first_reading
from howfast.samplers.own_connection import OwnConnections
from howfast.samplers.plugin import SamplerSetup
from howfast.samplers.registry import create_samplers, step_sections
from howfast.targets.base import Connection, Target
from howfast.targets.capabilities import HasLocalStandbys, HasStorage

# A sampler more (such as --prometheus's) for each sampled step, given the target and the
# devices behind its roles; None: nothing to add for this target.
SamplerFactory = Callable[[Target, list[RoleDevice]], Sampler | None]
T = TypeVar("T")


class TargetSampling:
    """Resolves the target's devices once; starts a session for each sampled step."""

    def __init__(
        self,
        target: Target,
        connection: Connection | None,
        interval_s: float | None,
        host: Host | None = None,
        extra: Sequence[SamplerFactory] = (),
    ) -> None:
        self.target = target
        self.host = host
        self.extra = list(extra)
        self.connection = connection
        self.interval_s = interval_s
        # the PostgreSQL samplers' connections, kept from one step to the next (close())
        self.own_connections = OwnConnections()
        self.roles: list[RoleDevice] = []
        # The standbys' roles among them (their data directories, named as the standbys), after
        # the primary's: one on the primary's device says so and is not sampled twice.
        self.standby_roles: frozenset[str] = frozenset()
        self.problem: str | None = None
        if interval_s:
            try:
                paths = target.storage_paths() if isinstance(target, HasStorage) else {}
                if isinstance(target, HasLocalStandbys):
                    standbys = target.standby_storage_paths()
                    self.standby_roles = frozenset(standbys)
                    paths = {**paths, **standbys}
                self.roles = host.role_devices(paths) if host else resolve_roles(paths)
            except Exception as exc:  # the step still runs; it says why the disks are missing
                self.problem = (
                    f"cannot tell which devices hold {target.name}: {describe_failure(exc)}"
                )

    def start(
        self,
        workload: str,
        disturbed: Callable[[], bool] | None = None,
        connection_now: Callable[[], Connection | None] | None = None,
    ) -> StepSampling:
        """The samplers of one step. With events: `disturbed` says when an action cuts the
        service (readings then missed do not end a sampler), `connection_now` where the
        primary is now (a failover moves it)."""
        if not self.interval_s:
            return StepSampling([], None, [])
        sampled = {r.role: r.device for r in self.roles if r.device and not r.shares_with}
        primary = {k: v for k, v in sampled.items() if k not in self.standby_roles}
        standbys = {k: v for k, v in sampled.items() if k in self.standby_roles}
        setup = SamplerSetup(self.target, self.connection, primary, self.host, standbys)
        samplers = create_samplers(workload, setup)
        if samplers:  # a workload the samplers watch: extra ones (--prometheus) join them
            roles = [r for r in self.roles if r.role not in self.standby_roles]
            samplers += [s for s in (make(self.target, roles) for make in self.extra) if s]
        if not samplers:
            return StepSampling([], None, [])
        ctx = SamplerContext(
            self.target,
            self.connection,
            self.interval_s,
            connection_now=connection_now,
            own_connections=self.own_connections,
        )
        if disturbed is not None:
            ctx.disturbed = disturbed
        session = StepSampling(samplers, ctx, self.roles, self.standby_roles)
        if self.problem:
            session.notes.append(self.problem)
        session.start()
        return session

    def close(self) -> None:
        """Close the connections kept between the steps: before the target stops, or when
        another TargetSampling takes over (a failover's rebuild)."""
        self.own_connections.close()


@dataclass(frozen=True)
class SampledPart:
    """What the samplers saw of one step, for its outcome (runner/step.py joins them: the
    tool's own figures win); what it means is derived when the run is read
    (analysis/derive.py)."""

    series: Mapping[str, list[Sample]]
    metrics: Mapping[str, JSONValue]
    warnings: tuple[str, ...]
    sections: Mapping[str, dict[str, JSONValue]]


class StepSampling:
    """The samplers of one step. With no samplers, every method does nothing."""

    def __init__(
        self,
        samplers: list[Sampler],
        ctx: SamplerContext | None,
        roles: list[RoleDevice],
        standby_roles: frozenset[str] = frozenset(),
    ) -> None:
        self.samplers = samplers
        self.ctx = ctx
        self.roles = roles
        self.standby_roles = standby_roles
        self.notes: list[str] = []
        self.result: SamplerResult | None = None

    def start(self) -> None:
        """Every sampler's first reading at once, each in a thread: on a pod each one waits
        on the API server (an exec, a connection through the port-forward), and one after
        the other they held the step up for the sum of those waits."""
        ctx = self.ctx
        assert ctx is not None
        side_by_side([functools.partial(sampler.start, ctx) for sampler in self.samplers])

    def track_process(self, pid: int) -> None:
        """The workload started its load generator (pgbench): watch its CPU."""
        if self.ctx is not None:
            self.ctx.processes.add(pid, first_reading(pid, self.ctx.now()))

    def stop(self) -> None:
        if self.ctx is None or self.result is not None:
            return
        self.ctx.stopping_at = self.ctx.now()
        merged = SamplerResult(warnings=list(self.notes))
        for result in side_by_side([sampler.stop for sampler in self.samplers]):
            merged.merge(result)  # in the samplers' order, whichever stopped first
        self.result = merged

    def part(self) -> SampledPart | None:
        """What was sampled, once stopped; None when nothing was (no samplers)."""
        if self.result is None or self.ctx is None:
            return None
        r = self.result
        sections: dict[str, dict[str, JSONValue]] = {name: {} for name in step_sections()}
        for name, content in r.sections.items():
            sections.setdefault(name, {}).update(content)
        sections["io"]["roles"] = _roles_section(
            self.roles, sections["io"].get("roles"), self.standby_roles
        )
        sections["io"]["interval_s"] = self.ctx.interval_s
        sections["io"]["sampled_s"] = self.ctx.now()  # the step's length, when none was planned
        return SampledPart(dict(r.series), dict(r.metrics), tuple(r.warnings), sections)


def side_by_side(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Each call in a thread of its own (the first in this one); their results in order,
    once all have returned. What one raised is raised here, after the others ended."""
    results: list[T | None] = [None] * len(calls)
    errors: list[BaseException] = []

    def call(index: int) -> None:
        try:
            results[index] = calls[index]()
        except BaseException as exc:  # raised by the caller's thread, below
            errors.append(exc)

    threads = [
        threading.Thread(target=call, args=(i,), name="howfast-sampler-call", daemon=True)
        for i in range(1, len(calls))
    ]
    for thread in threads:
        thread.start()
    if calls:
        call(0)
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results  # type: ignore[return-value]  # every slot filled: no call raised


def _roles_section(
    roles: list[RoleDevice], sampled: JSONValue, standby_roles: frozenset[str] = frozenset()
) -> dict[str, JSONValue]:
    """Each role's device (and which role's samples it shares), with the disk sampler's
    counters for the roles it sampled; a standby's role names its standby (`standby`), which
    keeps it out of the primary's sums (analysis/io.py)."""
    counters = sampled if isinstance(sampled, dict) else {}
    out: dict[str, JSONValue] = {}
    for role in roles:
        info = role.describe()
        if role.role in standby_roles:
            info["standby"] = role.role
        if isinstance(counters.get(role.role), dict):
            info.update(counters[role.role])
        out[role.role] = info
    return out


def deep_merge(into: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            deep_merge(into[key], value)
        else:
            into[key] = value
