"""The operator's timeline of an event, from observations of the Cluster's status and the
-rw Service's EndpointSlices. The slices are the real operator's right after a failover
(tests/data/cnpg/v1.27.1/promoted/); a Cluster caught mid-failover is HAND-MADE
(tests/data/cnpg/handmade/cluster-async.json: no recording has one); the
observations are built as ops.py makes them."""

from __future__ import annotations

from typing import Any

from howfast.targets.cnpg import timeline as tl
from tests.unit.cnpg_objects import load, recorded

HEALTHY = "Cluster in healthy state"
WALL0 = 1_800_000_000.0  # this machine's clock when the load started


def seen(t: float, primary: str, target: str, phase: str, rw: tuple[str, ...] | None,
         failing: str | None = None) -> tl.Observation:  # fmt: skip
    return tl.Observation(t, WALL0 + t, primary, target, phase, failing, rw)


def test_the_endpoint_slices_name_ready_pods_only() -> None:
    (slice_,) = [s for s in recorded("promoted", "endpointslices.json")["items"]
                 if s["metadata"]["name"].startswith("pg-rw-")]  # fmt: skip
    assert tl.endpoint_pods([slice_]) == ("pg-2",)
    slice_["endpoints"][0]["conditions"]["ready"] = False
    assert tl.endpoint_pods([slice_]) == ()


def test_an_observation_of_a_failing_cluster() -> None:
    observed = tl.observe(3.0, WALL0 + 3, load("cluster-async.json"), None)
    assert (observed.current_primary, observed.target_primary) == ("small-1", "small-2")
    assert observed.phase == "Failing over" and observed.rw_pods is None
    assert observed.failing_since == "2026-11-29T01:10:00.000000Z"


def test_a_failover_s_timeline() -> None:
    stamp = "2027-01-15T08:00:05.200000Z"  # WALL0 + 5.2 s
    assert tl.parse_time(stamp) == WALL0 + 5.2
    observations = [
        seen(5.0, "pg-1", "pg-1", HEALTHY, ("pg-1",)),
        seen(5.5, "pg-1", "pg-1", HEALTHY, ()),
        seen(6.0, "pg-1", "pg-1", "Failing over", (), failing=stamp),
        seen(6.5, "pg-1", "pg-2", "Failing over", ()),
        seen(7.25, "pg-2", "pg-2", "Failing over", ()),
        seen(7.5, "pg-2", "pg-2", "Creating a new replica", ("pg-2",)),
        seen(9.0, "pg-2", "pg-2", HEALTHY, ("pg-2",)),
    ]
    out = tl.timeline(observations, "pg-1")
    assert out["new_primary"] == "pg-2"
    assert out["primary_failing_s"] == 5.2  # the operator's stamp, before it was read at 6.0
    assert (out["target_chosen_s"], out["promoted_s"]) == (6.5, 7.25)
    assert (out["rw_empty_s"], out["rw_moved_s"], out["healthy_s"]) == (5.5, 7.5, 9.0)
    assert out["phases"] == [HEALTHY, "Failing over", "Creating a new replica", HEALTHY]


def test_nothing_changed_is_said_as_nothing() -> None:
    out = tl.timeline([seen(1.0, "pg-1", "pg-1", HEALTHY, None)], "pg-1")
    assert out["new_primary"] is None and out["promoted_s"] is None
    assert out["rw_moved_s"] is None and out["healthy_s"] is None
    assert tl.timeline([], "pg-1") == {"old_primary": "pg-1", "observations": 0}


def test_the_cluster_s_events_since_the_request_in_order() -> None:
    events: list[dict[str, Any]] = [
        {"reason": "FailingOver", "message": "Failing over from pg-1 to pg-2 ",
         "lastTimestamp": "2027-01-15T08:00:06Z"},
        {"reason": "Old", "message": "before", "lastTimestamp": "2027-01-15T07:00:00Z"},
        {"reason": "FailoverTarget", "message": "pg-2", "eventTime": "2027-01-15T08:00:05.5Z"},
    ]  # fmt: skip
    lines = tl.event_lines(events, WALL0 + 5.0)
    assert [line["reason"] for line in lines] == ["FailoverTarget", "FailingOver"]  # type: ignore[index]
    assert lines[1] == {"at": WALL0 + 6.0, "reason": "FailingOver",
                        "message": "Failing over from pg-1 to pg-2"}  # fmt: skip
