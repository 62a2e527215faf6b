"""crash: SIGKILL of the postmaster (no shutdown), wait for its processes, start: the
server recovers from its WAL. Verified by a new postmaster and the log's recovery lines."""

from __future__ import annotations

from howfast.events import identity
from howfast.events.base import Applied, EventAction, EventContext, Verified
from howfast.events.serverlog import CRASHED, REDO_DONE, LogPoint
from howfast.eventspec import ActionSyntax, EventSpec
from howfast.targets.capabilities import Crashable, HasServerIdentity


class Crash(EventAction):
    syntax = ActionSyntax("crash", disturbs_service=True, order=30)
    summary = "SIGKILL of the postmaster, then start: crash recovery"
    docs = "docs/events.md#the-actions"
    on_old_primary = True
    needs = "a server howfast started and holds (a directory or an emulated volume)"
    requires = (Crashable, HasServerIdentity)
    acts_on_promoted = False  # refused on a promoted standby (targets/local/takeover.py)

    def apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        target = ctx.target
        assert isinstance(target, Crashable) and isinstance(target, HasServerIdentity)
        before = target.server_identity()
        log = LogPoint.now(target)
        applied = ctx.now()
        done = target.crash()
        back = identity.service_back(ctx, done)
        facts = {**identity.facts(before), **done}
        return Applied(applied, back, facts=facts, before={"id": before, "log": log})

    def verify(self, ctx: EventContext, spec: EventSpec, applied: Applied) -> Verified:
        checked = identity.verify_new_server(ctx, applied, CRASHED, "crash recovery")
        log = applied.before.get("log")
        if not checked.ok or not isinstance(log, LogPoint):
            return checked
        for line in log.lines_since():
            found = REDO_DONE.search(line)
            if found:
                return Verified(True, {**checked.evidence, "redo_s": float(found.group(1))})
        return checked


ACTION = Crash()
