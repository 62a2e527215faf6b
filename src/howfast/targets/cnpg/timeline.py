"""The operator's timeline of an event, beside the outage the client saw: what the Cluster's
status and the -rw Service said, observed about four times a second while the event ran
(ops.py watches; this decides what the observations mean). Pure.

    primary_failing_s   the status first said the primary failed (phase "Failing over",
                        or currentPrimaryFailingSinceTimestamp)
    target_chosen_s     targetPrimary first named another instance: the operator's choice
    promoted_s          currentPrimary first named it: promoted
    rw_empty_s          the -rw Service first had no ready endpoint
    rw_moved_s          the -rw Service first pointed only at the new primary
    healthy_s           the phase first said healthy again after the change

Times are seconds into the load, as the event's own (event_marks.py); a status timestamp
(the operator's clock) is put on the load's clock by the offset seen when it was read."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from howfast.model import JSONValue
from howfast.targets.cnpg.discovery import HEALTHY_PHASE
from howfast.targets.cnpg.operator import FAILOVER_PHASE


@dataclass(frozen=True)
class Observation:
    t: float  # seconds into the load
    wall: float  # this machine's epoch seconds at t
    current_primary: str
    target_primary: str
    phase: str
    failing_since: str | None  # status.currentPrimaryFailingSinceTimestamp
    rw_pods: tuple[str, ...] | None  # pods behind the -rw Service, ready; None: not read


def observe(
    t: float, wall: float, cluster: Mapping[str, Any], slices: Sequence[Mapping[str, Any]] | None
) -> Observation:
    status = cluster.get("status") or {}
    return Observation(
        t=t,
        wall=wall,
        current_primary=str(status.get("currentPrimary") or ""),
        target_primary=str(status.get("targetPrimary") or ""),
        phase=str(status.get("phase") or ""),
        failing_since=status.get("currentPrimaryFailingSinceTimestamp") or None,
        rw_pods=None if slices is None else endpoint_pods(slices),
    )


def endpoint_pods(slices: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The pods an EndpointSlice list of a Service sends to: ready endpoints only."""
    names = set()
    for piece in slices:
        for endpoint in piece.get("endpoints") or []:
            ready = (endpoint.get("conditions") or {}).get("ready")
            ref = endpoint.get("targetRef") or {}
            if ready is not False and ref.get("kind") == "Pod" and ref.get("name"):
                names.add(str(ref["name"]))
    return tuple(sorted(names))


def parse_time(text: str | None) -> float | None:
    """The operator's RFC 3339 timestamps (with or without fraction) as epoch seconds."""
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _first(observations: Sequence[Observation], test: Any) -> Observation | None:
    return next((o for o in observations if test(o)), None)


def timeline(observations: Sequence[Observation], old_primary: str) -> dict[str, JSONValue]:
    """What the operator did, from the observations of one event (in time order)."""
    out: dict[str, JSONValue] = {"old_primary": old_primary, "observations": len(observations)}
    if not observations:
        return out
    chosen = _first(observations, lambda o: o.target_primary not in ("", old_primary))
    new = chosen.target_primary if chosen else None
    promoted = _first(observations, lambda o: o.current_primary not in ("", old_primary))
    if promoted is not None:
        new = promoted.current_primary
    failing = _first(observations, lambda o: o.phase == FAILOVER_PHASE or o.failing_since)
    failing_s = None if failing is None else failing.t
    if failing is not None and failing.failing_since:
        stamp = parse_time(failing.failing_since)
        if stamp is not None:  # the operator's instant, on the load's clock
            failing_s = min(failing.t, stamp - (failing.wall - failing.t))
    empty = _first(observations, lambda o: o.rw_pods is not None and not o.rw_pods)
    moved = None if new is None else _first(observations, lambda o: o.rw_pods == (new,))
    after = promoted or chosen
    healthy = (
        None
        if after is None
        else _first(observations, lambda o: o.t >= after.t and o.phase == HEALTHY_PHASE)
    )
    phases: list[JSONValue] = []
    for o in observations:
        if not phases or phases[-1] != o.phase:
            phases.append(o.phase)
    out.update(
        new_primary=new,
        primary_failing_s=_r(failing_s),
        target_chosen_s=_r(chosen.t if chosen else None),
        promoted_s=_r(promoted.t if promoted else None),
        rw_empty_s=_r(empty.t if empty else None),
        rw_moved_s=_r(moved.t if moved else None),
        healthy_s=_r(healthy.t if healthy else None),
        phases=phases,
    )
    return out


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def event_lines(events: Sequence[Mapping[str, Any]], since_epoch: float) -> list[JSONValue]:
    """The Cluster's Kubernetes events from `since_epoch` on, oldest first, as
    {"at": epoch, "reason", "message"} (their times as the API gives them: seconds)."""
    out = []
    for event in events:
        when = parse_time(
            event.get("eventTime") or event.get("lastTimestamp") or event.get("firstTimestamp")
        )
        if when is None or when < since_epoch - 1.0:  # the API's times have 1 s resolution
            continue
        out.append((when, str(event.get("reason") or ""), str(event.get("message") or "")))
    return [
        {"at": round(w, 3), "reason": reason, "message": message.strip()}
        for w, reason, message in sorted(out)
    ]
