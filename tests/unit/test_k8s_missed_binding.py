"""A pod the scheduler left parked after its claims bound is made again, once the
contradiction has lasted, at most a few times, and only then (missed_binding.py)."""

from typing import Any

from howfast.targets.k8s.missed_binding import (
    MOST_REMAKES,
    REMAKE_AFTER_S,
    REMAKE_EVERY_S,
    MissedBinding,
    parked_for_bound_claims,
    remade_manifest,
)

# The scheduler's words in the loaded make test where the pod stayed parked.
PARKED_MESSAGE = (
    "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found"
)


def _pod(message: str = PARKED_MESSAGE, node: str | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "howfast-9390de75", "uid": "u1", "resourceVersion": "7",
                     "labels": {"app.kubernetes.io/managed-by": "howfast"}},
        "spec": {"containers": [{"name": "postgres"}], "priority": 0,
                 **({"nodeName": node} if node else {})},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": message}]},
    }  # fmt: skip


def test_parked_only_when_every_claim_is_bound_and_the_scheduler_says_unbound():
    assert parked_for_bound_claims(_pod(), {"data": "Bound", "wal": "Bound"})
    assert not parked_for_bound_claims(_pod(), {"data": "Bound", "wal": "Pending"})
    assert not parked_for_bound_claims(_pod(), {"data": None})  # a claim missing
    assert not parked_for_bound_claims(_pod(), {})
    assert not parked_for_bound_claims(_pod("0/2 nodes: Insufficient cpu"), {"data": "Bound"})
    assert not parked_for_bound_claims(_pod(node="localhost"), {"data": "Bound"})


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_made_again_after_the_contradiction_lasts_then_spaced_and_bounded():
    clock = _Clock()
    phases = {"data": "Pending"}
    remade: list[str] = []
    missed = MissedBinding(
        ["data"], phases.get, lambda pod: remade.append(pod["metadata"]["uid"]), clock
    )
    missed.check(_pod())  # the claim is not bound yet: the scheduler is right
    clock.now += 60
    missed.check(_pod())
    assert remade == [] and missed.said() == []
    phases["data"] = "Bound"
    missed.check(_pod())  # the contradiction starts here
    clock.now += REMAKE_AFTER_S - 1
    missed.check(_pod())
    assert remade == []
    clock.now += 1
    missed.check(_pod())
    assert remade == ["u1"]
    clock.now += REMAKE_EVERY_S - 1
    missed.check(_pod())
    assert len(remade) == 1
    for _ in range(10):
        clock.now += REMAKE_EVERY_S
        missed.check(_pod())
    assert len(remade) == MOST_REMAKES
    assert "made the pod again 3 time(s)" in missed.said()[0]


def test_a_pod_scheduled_meanwhile_resets_the_watch():
    clock = _Clock()
    remade: list[object] = []
    missed = MissedBinding(["data"], lambda claim: "Bound", remade.append, clock)
    missed.check(_pod())
    clock.now += REMAKE_AFTER_S - 1
    missed.check(_pod(node="localhost"))  # scheduled after all
    clock.now += 5
    missed.check(_pod())  # parked again: counted from here
    assert remade == []
    missed.check(None)
    assert MissedBinding([], lambda claim: "Bound", remade.append, clock).since is None


def test_the_pod_made_again_has_what_was_asked_for_and_nothing_the_server_set():
    pod = _pod()
    pod["metadata"].update(creationTimestamp="2026-11-29T00:00:00Z", managedFields=[{}])
    made = remade_manifest(pod)
    assert made["metadata"] == {
        "name": "howfast-9390de75",
        "labels": {"app.kubernetes.io/managed-by": "howfast"},
    }
    assert made["spec"] == {"containers": [{"name": "postgres"}]}  # the computed priority goes
    assert "status" not in made and made["kind"] == "Pod"
