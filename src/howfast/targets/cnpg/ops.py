"""Events through the operator on a `cnpg://` target (OperatorManaged): the request
(operator.py builds it), then the watch: the Cluster's status and the -rw Service's
endpoints read about four times a second until a new primary serves (timeline.py says what
they mean), and the Cluster's events. A thin executor: the decisions are pure elsewhere.

    delete-pod   the primary's pod deleted: the operator notices and fails over
    failover     a standby promoted as `kubectl cnpg promote` does (the named one, else
                 the first by name)
    switchover   the same request to the standby the primary had flushed furthest
    restart      the primary restarted in place as `kubectl cnpg restart CLUSTER PRIMARY`
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from howfast.errors import HowfastError
from howfast.model import JSONValue
from howfast.targets.cnpg import operator as op
from howfast.targets.cnpg import timeline as tl
from howfast.targets.cnpg.discovery import ClusterLayout

ACTIONS = ("delete-pod", "failover", "switchover", "restart")
WATCH_INTERVAL_S = 0.25
WATCH_TIMEOUT_S = 300.0  # the operator's own switchoverDelay default is 3600 s: ours is less
AFTER_S = 10.0  # the watch goes on this long for the -rw Service to move, once a primary serves
PATCH_ATTEMPTS = 5  # a 409 (the Cluster changed since read): read again, patch again


class OperatorApi(Protocol):
    """What the events ask of the API (api.py's CnpgApi)."""

    def read_cluster(self, namespace: str, name: str) -> dict[str, Any]: ...
    def rw_slices(self, namespace: str, service: str) -> list[dict[str, Any]]: ...
    def cluster_events(self, namespace: str, name: str) -> list[dict[str, Any]]: ...
    def patch_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None: ...
    def delete_pod(self, namespace: str, name: str) -> None: ...


@dataclass(frozen=True)
class Serving:
    """What the primary said when asked (None: it did not answer)."""

    instance: str
    in_recovery: bool
    started_at: str  # pg_postmaster_start_time()
    timeline: int


class OperatorEvents:
    """One target's operator events. `layout()` reads the cluster again; `serving(name)`
    asks an instance (through a port-forward to its pod) whether it is a primary."""

    def __init__(
        self,
        api: OperatorApi,
        namespace: str,
        name: str,
        layout: Callable[[], ClusterLayout],
        serving: Callable[[str], Serving | None],
        standby_lags: Callable[[], Mapping[str, int | None]],
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.layout = layout
        self.serving = serving
        self.standby_lags = standby_lags

    def refusal(self, action: str, arg: str | None, layout: ClusterLayout) -> str | None:
        if action not in ACTIONS:
            return f"{action} is not done through the operator on a cnpg:// target"
        if action in ("failover", "switchover"):
            if not layout.standbys():
                return f"Cluster {layout.name} has no standby to promote (spec.instances: 1)"
            if arg is not None:
                return op.promote_refusal(layout, arg)
        if action == "delete-pod" and not layout.standbys():
            return (
                f"Cluster {layout.name} has one instance: deleting its pod is an outage "
                "until it is made again, not a failover (give the cluster a standby)"
            )
        return None

    def run(self, action: str, arg: str | None, now: Callable[[], float]) -> dict[str, JSONValue]:
        before = self.layout()
        refused = self.refusal(action, arg, before)  # the cluster as it is now
        if refused is not None:
            raise HowfastError(refused)
        old = before.current_primary
        old_serving = self.serving(old)
        if old_serving is None and action == "restart":  # a restart is told by a new start
            raise HowfastError(f"the primary {old} does not answer: nothing to restart")
        promote = self._promotion(action, arg, before)
        applied_wall = time.time()
        self._ask(action, promote, before)
        facts: dict[str, JSONValue] = {
            "through": "operator",
            "old_primary": old,
            "asked_primary": promote,
            "timeline_before": None if old_serving is None else old_serving.timeline,
        }
        serving, observations = self._watch(action, old, old_serving, now)
        facts.update(
            back_s=None if serving is None else round(serving[0], 3),
            serves=serving is not None,
            new_primary=None if serving is None else serving[1].instance,
            in_recovery_after=None if serving is None else serving[1].in_recovery,
            timeline_after=None if serving is None else serving[1].timeline,
            restarted=None
            if serving is None or old_serving is None
            else serving[1].started_at != old_serving.started_at,
            timeline=tl.timeline(observations, old),
            operator_events=self._events(applied_wall),
        )
        return facts

    def _promotion(self, action: str, arg: str | None, layout: ClusterLayout) -> str | None:
        if action == "failover":
            return arg or layout.standbys()[0].name
        if action == "switchover":
            chosen = arg or op.most_advanced_standby(layout, self.standby_lags())
            if chosen is None:
                raise HowfastError(f"Cluster {layout.name}: no Ready standby to switch over to")
            return chosen
        return None

    def _ask(self, action: str, promote: str | None, layout: ClusterLayout) -> None:
        if action == "delete-pod":
            self.api.delete_pod(self.namespace, layout.current_primary)
            return
        for attempt in range(PATCH_ATTEMPTS):
            cluster = self.api.read_cluster(self.namespace, self.name)
            stamp = op.operator_time(time.time())
            patch = (
                op.promote_patch(cluster, promote, stamp)
                if promote is not None
                else op.restart_primary_patch(cluster, stamp)
            )
            try:
                self.api.patch_status(self.namespace, self.name, patch)
                return
            except HowfastError as exc:  # 409: the Cluster changed since it was read
                if "409" not in str(exc) and "modified" not in str(exc).lower():
                    raise
                if attempt == PATCH_ATTEMPTS - 1:
                    raise
                time.sleep(0.2)

    def _observe(self, now: Callable[[], float], service: str) -> tl.Observation:
        cluster = self.api.read_cluster(self.namespace, self.name)
        try:
            slices: list[dict[str, Any]] | None = self.api.rw_slices(self.namespace, service)
        except HowfastError:
            slices = None  # a Role without EndpointSlices: the timeline says nothing of them
        return tl.observe(now(), time.time(), cluster, slices)

    def _watch(
        self, action: str, old: str, old_serving: Serving | None, now: Callable[[], float]
    ) -> tuple[tuple[float, Serving] | None, list[tl.Observation]]:
        """Until a primary serves (a new one, or after a restart the old one started again),
        then AFTER_S more for the -rw Service; the observations all along."""
        service = f"{self.name}-rw"
        observations: list[tl.Observation] = []
        found: tuple[float, Serving] | None = None
        deadline = time.monotonic() + WATCH_TIMEOUT_S
        while time.monotonic() < deadline:
            with _quiet():
                observations.append(self._observe(now, service))
            last = observations[-1] if observations else None
            if found is None and last is not None and last.current_primary:
                serving = self.serving(last.current_primary)
                if serving is not None and _serves_again(action, old, old_serving, serving):
                    found = (now(), serving)
                    deadline = min(deadline, time.monotonic() + AFTER_S)
            if found is not None and last is not None and last.rw_pods == (found[1].instance,):
                break
            time.sleep(WATCH_INTERVAL_S)
        return found, observations

    def _events(self, since_epoch: float) -> list[JSONValue]:
        try:
            events = self.api.cluster_events(self.namespace, self.name)
        except HowfastError:
            return []
        return tl.event_lines(events, since_epoch)


def _serves_again(action: str, old: str, before: Serving | None, now: Serving) -> bool:
    if now.in_recovery:
        return False
    if action == "restart":
        return before is None or now.started_at != before.started_at
    return now.instance != old


class _quiet:
    """A read that fails while the operator moves things is a missed observation."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> bool:
        return kind is not None and issubclass(kind, HowfastError)
