"""The events' executor (targets/cnpg/ops.py) driven through a SCRIPTED stand-in for the
Kubernetes API: no operator runs here (tests/k8s/test_cnpg.py runs the real one on the lab).
The stand-in answers what a switchover looks like from the API, one step per observation
(the Cluster's status, the -rw Service's endpoints), and records what howfast sent: the
request, its retry after a conflict, and the timeline and verdict made of what it saw."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from howfast.errors import HowfastError
from howfast.events.operator import verdict
from howfast.targets.cnpg import discovery as disc
from howfast.targets.cnpg.ops import OperatorEvents, Serving
from tests.unit.cnpg_objects import items, load

HEALTHY = disc.HEALTHY_PHASE
# (currentPrimary, targetPrimary, phase, pods behind -rw), one per observation
SWITCHOVER = [
    ("pg-1", "pg-2", "Switchover in progress", ("pg-1",)),
    ("pg-1", "pg-2", "Switchover in progress", ()),
    ("pg-2", "pg-2", "Switchover in progress", ()),
    ("pg-2", "pg-2", HEALTHY, ("pg-2",)),
]


class ScriptedApi:
    def __init__(self, script: list[tuple[str, str, str, tuple[str, ...]]], conflicts: int = 0):
        self.script = script
        self.step = -1  # before the request: the cluster as it was
        self.patches: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.conflicts = conflicts

    def _state(self) -> tuple[str, str, str, tuple[str, ...]]:
        if self.step < 0:
            return ("pg-1", "pg-1", HEALTHY, ("pg-1",))
        return self.script[min(self.step, len(self.script) - 1)]

    def read_cluster(self, namespace: str, name: str) -> dict[str, Any]:
        cluster = copy.deepcopy(load("cluster-pg.json"))
        current, target, phase, _ = self._state()
        cluster["metadata"]["resourceVersion"] = str(10 + self.step)
        cluster["status"].update(currentPrimary=current, targetPrimary=target, phase=phase)
        return dict(cluster)

    def rw_slices(self, namespace: str, service: str) -> list[dict[str, Any]]:
        pods = self._state()[3]
        self.step += 1  # each observation reads the Cluster, then the Service: then time moves
        endpoint = [{"conditions": {"ready": True}, "targetRef": {"kind": "Pod", "name": p}}
                    for p in pods]  # fmt: skip
        return [{"endpoints": endpoint}]

    def cluster_events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return []

    def patch_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        if self.conflicts:
            self.conflicts -= 1
            raise HowfastError("patching the status of Cluster lab/pg: 409 Conflict")
        self.patches.append(patch)
        self.step = 0

    def delete_pod(self, namespace: str, name: str) -> None:
        self.deleted.append(name)
        self.step = 0


def events(api: ScriptedApi) -> OperatorEvents:
    layout = disc.layout(load("cluster-pg.json"), items("pods-pg.json"), items("pvcs-pg.json"))

    def serving(name: str) -> Serving | None:
        current = api._state()[0]
        if name != current:
            return None  # a standby, or the old primary shut down: not a primary serving
        return Serving(name, False, f"start-{name}", 2 if name == "pg-2" else 1)

    return OperatorEvents(api, "lab", "pg", lambda: layout, serving, lambda: {"pg-2": 0})


def clock() -> Any:
    ticks = iter(range(1000))
    return lambda: float(next(ticks))


def test_a_switchover_asks_the_operator_then_watches_until_the_new_primary_serves() -> None:
    api = ScriptedApi(SWITCHOVER, conflicts=1)
    facts = events(api).run("switchover", None, clock())
    (patch,) = api.patches  # sent again after the conflict
    assert patch["status"]["targetPrimary"] == "pg-2"
    assert facts["old_primary"] == "pg-1" and facts["new_primary"] == "pg-2"
    assert facts["asked_primary"] == "pg-2" and facts["serves"] is True
    assert (facts["timeline_before"], facts["timeline_after"]) == (1, 2)
    timeline = facts["timeline"]
    assert isinstance(timeline, dict)
    assert timeline["new_primary"] == "pg-2" and timeline["rw_empty_s"] is not None
    assert timeline["target_chosen_s"] is not None and timeline["rw_moved_s"] is not None
    promoted, moved = timeline["promoted_s"], timeline["rw_moved_s"]
    assert isinstance(promoted, float) and isinstance(moved, float) and promoted <= moved
    assert verdict("switchover", facts) is None


def test_delete_pod_deletes_the_primary_s_pod_and_asks_nothing_else() -> None:
    api = ScriptedApi(SWITCHOVER)
    facts = events(api).run("delete-pod", None, clock())
    assert api.deleted == ["pg-1"] and api.patches == []
    assert facts["new_primary"] == "pg-2" and facts["asked_primary"] is None


def test_a_conflict_that_does_not_end_is_the_event_s_error() -> None:
    api = ScriptedApi(SWITCHOVER, conflicts=99)
    with pytest.raises(HowfastError, match="409"):
        events(api).run("failover", "pg-2", clock())


def test_a_standby_that_is_not_there_is_refused_before_anything_is_asked() -> None:
    api = ScriptedApi(SWITCHOVER)
    with pytest.raises(HowfastError, match="pg-9 is not an instance of Cluster pg"):
        events(api).run("failover", "pg-9", clock())
    assert api.patches == [] and api.deleted == []


RESTART = [
    ("pg-1", "pg-1", "Primary instance is being restarted in-place", ("pg-1",)),
    ("pg-1", "pg-1", "Primary instance is being restarted in-place", ()),
    ("pg-1", "pg-1", HEALTHY, ("pg-1",)),
]


def test_a_restart_asks_an_in_place_restart_and_waits_for_a_new_start() -> None:
    api = ScriptedApi(RESTART)
    layout = disc.layout(load("cluster-pg.json"), items("pods-pg.json"), items("pvcs-pg.json"))

    def serving(name: str) -> Serving | None:
        if api.step in (0, 1):
            return None  # restarting
        return Serving(name, False, "later" if api.step >= 2 else "first", 1)

    ops = OperatorEvents(api, "lab", "pg", lambda: layout, serving, lambda: {})
    facts = ops.run("restart", None, clock())
    (patch,) = api.patches
    assert patch["status"]["phase"] == "Primary instance is being restarted in-place"
    assert facts["new_primary"] == "pg-1" and facts["restarted"] is True
    assert verdict("restart", facts) is None
