"""Whether the server that answers after an action is a new one: shared by restart and
crash (and, later, the pod actions)."""

from __future__ import annotations

from collections.abc import Mapping

from howfast.events.base import Applied, EventContext, Verified
from howfast.events.serverlog import LogPoint, first_with
from howfast.model import JSONValue
from howfast.targets.capabilities import HasServerIdentity, ServerIdentity


def service_back(ctx: EventContext, done: Mapping[str, JSONValue]) -> float:
    """When the server accepted connections again, seconds into the load: now, less the time
    spent after it waiting for its standbys to stream (`standbys_streaming_s`), which is not
    time without service (issue 35: a restart with a standby said "back after 5.42 s" while
    the load committed again 0.34 s after it)."""
    waited = done.get("standbys_streaming_s")
    return ctx.now() - (float(waited) if isinstance(waited, int | float) else 0.0)


def facts(before: ServerIdentity) -> dict[str, JSONValue]:
    return {"pid_before": before.pid, "started_at_before": before.started_at}


def verify_new_server(ctx: EventContext, applied: Applied, log_text: str, what: str) -> Verified:
    """A new postmaster (another pid, or a later start time) answers, and, when the log can be
    read here, it has the line `log_text` (the start after `what`)."""
    target = ctx.target
    assert isinstance(target, HasServerIdentity)
    before = applied.before.get("id")
    assert isinstance(before, ServerIdentity)
    after = target.server_identity()
    evidence: dict[str, JSONValue] = {
        "pid_before": before.pid,
        "pid_after": after.pid,
        "started_at_before": before.started_at,
        "started_at_after": after.started_at,
    }
    new = (after.pid is not None and after.pid != before.pid) or (
        after.started_at is not None and after.started_at != before.started_at
    )
    if not new:
        return Verified(
            False, evidence, f"the same server answers after the {what} (pid {after.pid})"
        )
    log = applied.before.get("log")
    if not isinstance(log, LogPoint):
        evidence["log"] = "not readable here"
        return Verified(True, evidence)
    line = first_with(log.lines_since(), log_text)
    evidence["log_line"] = line
    if line is None:
        return Verified(
            False, evidence, f"the server log has no line '{log_text}' after the {what}"
        )
    return Verified(True, evidence)
