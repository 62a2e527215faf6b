"""restart: fast shutdown, then start (the target's own restart: locally SIGINT to the
postmaster, wait, start). Verified by a new postmaster and the log's clean-shutdown line."""

from __future__ import annotations

from howfast.events import identity
from howfast.events.base import Applied, EventContext, Verified
from howfast.events.operator import OperatorAware
from howfast.events.serverlog import SHUT_DOWN, LogPoint
from howfast.eventspec import ActionSyntax, EventSpec
from howfast.targets.capabilities import HasServerIdentity, Restartable


class Restart(OperatorAware):
    syntax = ActionSyntax("restart", disturbs_service=True, order=20)
    summary = "fast shutdown of the server, then start"
    docs = "docs/events.md#the-actions"
    on_old_primary = True
    needs = "a server howfast started and holds (a directory or an emulated volume)"
    requires = (Restartable, HasServerIdentity)
    acts_on_promoted = False  # refused on a promoted standby (targets/local/takeover.py)

    def own_apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        target = ctx.target
        assert isinstance(target, Restartable) and isinstance(target, HasServerIdentity)
        before = target.server_identity()
        log = LogPoint.now(target)
        applied = ctx.now()
        done = dict(target.restart() or {})
        back = identity.service_back(ctx, done)
        facts = {**identity.facts(before), **done}
        return Applied(applied, back, facts=facts, before={"id": before, "log": log})

    def own_verify(self, ctx: EventContext, spec: EventSpec, applied: Applied) -> Verified:
        return identity.verify_new_server(ctx, applied, SHUT_DOWN, "a clean shut-down")


ACTION = Restart()
