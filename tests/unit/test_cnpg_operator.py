"""The requests howfast sends the operator, as its kubectl plugin makes them (v1.27.1,
internal/cmd/plugin/promote and restart). HAND-MADE objects (tests/data/cnpg/handmade/)."""

from __future__ import annotations

import pytest

from howfast.targets.cnpg import discovery as disc
from howfast.targets.cnpg import operator as op
from tests.unit.cnpg_objects import items, load

NOW = "2026-11-29T02:00:00.000000Z"


def pg() -> disc.ClusterLayout:
    return disc.layout(load("cluster-pg.json"), items("pods-pg.json"), items("pvcs-pg.json"))


def test_promote_patches_the_status_with_the_resource_version_as_the_plugin_does() -> None:
    cluster = load("cluster-pg.json")
    cluster["metadata"]["resourceVersion"] = "4711"
    cluster["status"]["conditions"] = [
        {"type": "Ready", "status": "True", "lastTransitionTime": "then"},
        {"type": "ContinuousArchiving", "status": "True"},
    ]
    patch = op.promote_patch(cluster, "pg-2", NOW)
    assert patch["metadata"] == {"resourceVersion": "4711"}
    status = patch["status"]
    assert (status["targetPrimary"], status["targetPrimaryTimestamp"]) == ("pg-2", NOW)
    assert status["phase"] == "Switchover in progress"
    assert status["phaseReason"] == "Switching over to pg-2"
    ready, archiving = status["conditions"]
    assert (ready["status"], ready["reason"], ready["lastTransitionTime"]) == (
        "False", "ClusterIsNotReady", NOW,
    )  # fmt: skip
    assert archiving == {"type": "ContinuousArchiving", "status": "True"}


def test_restart_of_the_primary_asks_an_in_place_restart() -> None:
    cluster = load("cluster-pg.json")
    cluster["metadata"]["resourceVersion"] = "1"
    status = op.restart_primary_patch(cluster, NOW)["status"]
    assert status["phase"] == "Primary instance is being restarted in-place"
    assert status["phaseReason"] == "Requested by the user"
    assert status["conditions"][0]["type"] == "Ready"


def test_a_patch_needs_the_object_as_read() -> None:
    with pytest.raises(ValueError, match="no resourceVersion"):
        op.promote_patch(load("cluster-pg.json"), "pg-2", NOW)


def test_the_ready_condition_keeps_its_transition_time_when_unchanged() -> None:
    kept = op.ready_condition(
        [{"type": "Ready", "status": "True", "lastTransitionTime": "then"}], disc.HEALTHY_PHASE, NOW
    )
    assert kept[0]["lastTransitionTime"] == "then" and kept[0]["reason"] == "ClusterIsReady"


def test_what_cannot_be_promoted() -> None:
    layout = pg()
    assert op.promote_refusal(layout, "pg-2") is None
    assert op.promote_refusal(layout, "pg-1") == "pg-1 is already the primary of Cluster pg"
    refused = op.promote_refusal(layout, "pg-9")
    assert refused == "pg-9 is not an instance of Cluster pg (its standbys: pg-2, pg-3)"


def test_a_switchover_goes_to_the_standby_flushed_furthest() -> None:
    layout = pg()
    assert op.most_advanced_standby(layout, {"pg-2": 900, "pg-3": 10}) == "pg-3"
    assert op.most_advanced_standby(layout, {"pg-2": None, "pg-3": None}) == "pg-2"
    assert op.most_advanced_standby(layout, {"pg-3": 0}) == "pg-3"


def test_operator_time_is_rfc3339_with_microseconds() -> None:
    assert op.operator_time(0.25) == "1970-01-01T00:00:00.250000Z"
