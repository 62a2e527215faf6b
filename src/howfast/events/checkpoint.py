"""checkpoint: CHECKPOINT on the primary, over SQL (any target with a server). Verified by
the count of requested checkpoints, which the server raises once the checkpoint is done."""

from __future__ import annotations

import time

from howfast.errors import HowfastError
from howfast.events.base import Applied, EventAction, EventContext, Verified
from howfast.events.serverlog import CHECKPOINT_DONE, LogPoint, first_with
from howfast.eventspec import ActionSyntax, EventSpec
from howfast.model import JSONValue
from howfast.targets import pgquery
from howfast.targets.base import Connection

# PostgreSQL 17 moved the checkpointer's counters out of pg_stat_bgwriter.
REQUESTED_17 = "SELECT num_requested FROM pg_stat_checkpointer"
REQUESTED = "SELECT checkpoints_req FROM pg_stat_bgwriter"
# The checkpointer reports its counters shortly after the checkpoint ends.
COUNTER_WAIT_S = 3.0


def requested(conn: Connection) -> int:
    with pgquery.connect(conn) as db:
        row = db.execute(REQUESTED).fetchone()
    if row is None or row[0] is None:
        raise HowfastError("the server did not say how many checkpoints were requested")
    return int(str(row[0]))


class Checkpoint(EventAction):
    syntax = ActionSyntax("checkpoint", order=10)
    summary = "CHECKPOINT on the primary"
    docs = "docs/events.md#the-actions"

    def apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        conn = ctx.primary()
        count = requested(conn)
        log = LogPoint.now(ctx.target)
        applied = ctx.now()
        took = pgquery.checkpoint(conn)
        return Applied(
            applied,
            None,
            facts={"checkpoint_s": round(took, 3)},
            before={"count": count, "log": log},
        )

    def verify(self, ctx: EventContext, spec: EventSpec, applied: Applied) -> Verified:
        before = applied.before["count"]
        assert isinstance(before, int)
        deadline = time.monotonic() + COUNTER_WAIT_S
        after = requested(ctx.primary())
        while after <= before and time.monotonic() < deadline and not ctx.cancel.wait(0.1):
            after = requested(ctx.primary())
        evidence: dict[str, JSONValue] = {"requested_before": before, "requested_after": after}
        log = applied.before.get("log")
        if isinstance(log, LogPoint):
            evidence["log_line"] = first_with(log.lines_since(), CHECKPOINT_DONE)
        if after <= before:
            return Verified(False, evidence, "the count of requested checkpoints did not grow")
        return Verified(True, evidence)


ACTION = Checkpoint()
