"""The pure parts of issue 29's pod events on `k8s://` targets (targets/k8s/moves.py): which
nodes take a pod, whether a volume or a class ties the data to one node, where a move goes,
the new pod's manifest; and what the target refuses before anything exists. The lab runs
them for real (tests/k8s/test_events.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from howfast.design import DesignOptions
from howfast.events.checks import refusals
from howfast.machine.pgbin import PgInstall
from howfast.plugin.events import event_from_text
from howfast.targets import registry
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s import moves
from howfast.targets.k8s.spec import K8sOptions, parse_target
from howfast.targets.k8s.target import K8sTarget
from howfast.targets.kind import TargetOptions

INSTALL = PgInstall(bindir=Path("/nonexistent"), version="15", source="test")


def _node(
    name: str,
    *,
    ready: bool = True,
    cordoned: bool = False,
    taints: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {moves.HOSTNAME_LABEL: name, **(labels or {})}},
        "spec": {"unschedulable": cordoned, "taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


NODES = [_node("a"), _node("b"), _node("c", cordoned=True)]


def _pv(terms: list[dict[str, Any]] | None, name: str = "pv-1") -> dict[str, Any]:
    spec: dict[str, Any] = {"storageClassName": "local"}
    if terms is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    return {"metadata": {"name": name}, "spec": spec}


def _on_host(*names: str) -> list[dict[str, Any]]:
    expression = {"key": moves.HOSTNAME_LABEL, "operator": "In", "values": list(names)}
    return [{"matchExpressions": [expression]}]


def test_schedulable_nodes_are_ready_uncordoned_and_untainted() -> None:
    nodes = [
        *NODES,
        _node("d", ready=False),
        _node("e", taints=[{"key": "x", "effect": "NoSchedule"}]),
        _node("f", taints=[{"key": "y", "effect": "PreferNoSchedule"}]),
    ]
    assert moves.schedulable(nodes) == ["a", "b", "f"]


def test_a_volume_tied_to_its_node_keeps_the_pod_there() -> None:
    assert moves.volume_nodes(_pv(None), NODES) is None  # network storage: every node
    assert moves.volume_nodes(_pv(_on_host("a")), NODES) == ["a"]
    assert moves.volume_nodes(_pv(_on_host("a", "b")), NODES) == ["a", "b"]
    zonal = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]
    nodes = [_node("a", labels={"zone": "z1"}), _node("b", labels={"zone": "z1"}), _node("c")]
    assert moves.volume_nodes(_pv(zonal), nodes) == ["a", "b"]
    pinned = moves.pinned_by_volumes({"howfast-x-data": _pv(_on_host("a"))}, NODES, "a")
    assert pinned is not None
    assert "claim howfast-x-data's volume pv-1 (StorageClass local) is tied to node a" in pinned
    assert moves.pinned_by_volumes({"d": _pv(_on_host("a", "b"))}, NODES, "a") is None
    assert moves.pinned_by_volumes({"d": _pv(None)}, NODES, "a") is None


def test_a_class_of_local_volumes_or_one_node_says_so_before_any_volume() -> None:
    local = {"metadata": {"name": "local"}, "provisioner": moves.LOCAL_PROVISIONER}
    assert "local PersistentVolumes" in str(moves.class_pins(local))
    one = {
        "metadata": {"name": "one"},
        "provisioner": "x",
        "allowedTopologies": [
            {"matchLabelExpressions": [{"key": moves.HOSTNAME_LABEL, "values": ["a"]}]}
        ],
    }
    assert (
        moves.class_pins(one) == "StorageClass one makes volumes on node a only (allowedTopologies)"
    )
    assert moves.class_pins({"metadata": {"name": "net"}, "provisioner": "csi.x"}) is None
    assert moves.class_pins(None) is None and moves.class_pins({}) is None


def test_a_move_needs_a_second_schedulable_node_and_a_real_one() -> None:
    names = ["a", "b", "c"]
    assert moves.move_refusal(None, ["a", "b"], names) is None
    assert moves.move_refusal("b", ["a", "b"], names) is None
    one = moves.move_refusal(None, ["a"], names)
    assert one == "a move needs a second node that takes pods: the cluster has 1 (a)"
    assert moves.move_refusal("z", ["a", "b"], names) == (
        "the cluster has no node z (its nodes: a, b, c)"
    )
    assert "node c takes no new pods" in str(moves.move_refusal("c", ["a", "b"], names))


def test_a_move_goes_to_the_node_asked_else_the_first_other_one() -> None:
    assert moves.destination(None, ["a", "b"], "a") == "b"
    assert moves.destination("a", ["a", "b"], "b") == "a"
    with pytest.raises(ValueError, match="already runs on a"):
        moves.destination("a", ["a", "b"], "a")
    with pytest.raises(ValueError, match="no node other than a"):
        moves.destination(None, ["a"], "a")


def test_the_new_pod_is_the_old_manifest_on_the_node_asked() -> None:
    plan = m.Plan("abc", "ns", parse_target("k8s://fast"), K8sOptions(node="a"), 5432)
    pod = m.pod(plan, {"name": "howfast-abc", "uid": "UID"})
    same = moves.pod_on(pod, None)
    assert same == pod and same is not pod
    moved = moves.pod_on(pod, "b")
    affinity = moved["spec"]["affinity"]["nodeAffinity"]
    (required,) = affinity.values()  # requiredDuringSchedulingIgnoredDuringExecution
    assert required["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["b"]
    assert pod["spec"]["affinity"]["nodeAffinity"] != moved["spec"]["affinity"]["nodeAffinity"]
    assert moved["spec"]["volumes"] == pod["spec"]["volumes"]  # the same claims


def _target(text: str = "k8s://fast", yes: str = "", **design: str) -> K8sTarget:
    options = TargetOptions(
        INSTALL,
        overwrite=bool(yes),  # --yes
        kind_options={"k8s": K8sOptions(namespace="bench", node="a")},
        design=DesignOptions(**design),  # type: ignore[arg-type]
    )
    (target,) = registry.make_targets([text], options)
    assert isinstance(target, K8sTarget)
    return target


@pytest.mark.parametrize(
    ("event", "text", "design", "said"),
    [
        (
            "4s:delete-pod",
            "k8s://fast",
            {"client": "same-pod"},
            "--client same-pod), which the event deletes",
        ),
        (
            "4s:move",
            "k8s://emptyDir",
            {},
            "the data is on an emptyDir, which is deleted with its pod",
        ),
        ("4s:move=a", "k8s://fast", {}, "the server's pod runs on a already (--node a)"),
        ("4s:drain=a", "k8s://fast", {}, "drain cordons node a for the cluster's other users"),
        (
            "4s:drain=b",
            "k8s://fast",
            {"client_node": "b", "yes": "y"},
            "pinned to b (--client-node)",
        ),
        ("4s:drain=b", "k8s://fast", {"client": "same-pod", "yes": "y"}, "which the drain evicts"),
        ("4s:delete-pod", "k8s://emptyDir?medium=Memory", {}, "deleted with its pod"),
    ],
)
def test_what_the_target_alone_refuses(
    event: str, text: str, design: dict[str, str], said: str
) -> None:
    found = refusals(_target(text, **design), [event_from_text(event)])
    assert len(found) == 1 and said in found[0], found


def test_accepted_events_are_remembered_for_the_checks_against_the_cluster() -> None:
    target = _target(yes="y")
    texts = ["4s:delete-pod", "8s:move=b", "12s:drain=b,for=2s"]
    assert refusals(target, [event_from_text(t) for t in texts]) == []
    assert target.recreations == [(None, False), ("b", True)]
    assert target.drains == ["b"]
    # the client pod keeps off a node a drain empties
    planned = target.planned().client
    assert planned is not None
    (pod,) = planned.objects
    assert "NotIn" in str(pod["spec"]["affinity"]["nodeAffinity"]) and "'b'" in str(pod["spec"])


def test_a_drain_needs_another_node_that_takes_pods() -> None:
    assert moves.drain_refusal("a", ["a", "b"], ["a", "b"]) is None
    assert moves.drain_refusal("z", ["a", "b"], ["a", "b"]) == (
        "the cluster has no node z (its nodes: a, b)"
    )
    alone = moves.drain_refusal("a", ["a"], ["a", "b"])
    assert alone is not None and "needs another node that takes pods" in alone


def test_cleanup_uncordons_only_the_nodes_a_runs_drain_cordoned() -> None:
    """The selection, on node documents (the lab runs the real call: a SIGKILLed run's
    cordon removed by `howfast cleanup`, docs/events.md)."""
    from howfast.targets.k8s.cleanup import uncordon_left
    from howfast.targets.k8s.names import CORDONED_BY

    class Nodes:  # the two calls uncordon_left makes, recorded
        def __init__(self) -> None:
            self.patched: list[tuple[str, bool, tuple[str, str]]] = []

        def nodes(self) -> list[dict[str, Any]]:
            mine = _node("a", cordoned=True)
            mine["metadata"]["annotations"] = {CORDONED_BY: "run1"}
            other = _node("b", cordoned=True)
            other["metadata"]["annotations"] = {CORDONED_BY: "run2"}
            return [mine, other, _node("c", cordoned=True)]

        def set_cordon(self, node: str, cordoned: bool, annotation: tuple[str, str]) -> None:
            self.patched.append((node, cordoned, annotation))

    cluster = Nodes()
    assert uncordon_left(cluster, "run1") == []  # type: ignore[arg-type]
    assert cluster.patched == [("a", False, (CORDONED_BY, "run1"))]
