"""delete-pod (`k8s://` targets): the server's pod is deleted (its server shuts down fast, as
on a node drain or a rollout) and made again from the same manifest on the same claims, as a
StatefulSet's controller would; the load, in its client pod, reconnects. Verified by a new pod
uid, a new server start time and the pgbench tables' rows found again."""

from __future__ import annotations

from howfast.events import pods
from howfast.events.base import Applied, EventContext, Verified
from howfast.events.operator import OperatorAware
from howfast.eventspec import ActionSyntax, EventSpec
from howfast.targets.base import Target
from howfast.targets.capabilities import PodRecreatable


class DeletePod(OperatorAware):
    syntax = ActionSyntax("delete-pod", disturbs_service=True, new_address=True, order=80)
    summary = "the server's pod deleted and made again"
    docs = "docs/events.md#the-actions"
    needs = "a server in a pod howfast created (a k8s:// target)"
    requires = (PodRecreatable,)

    def own_refusal(self, target: Target, spec: EventSpec) -> str | None:
        assert isinstance(target, PodRecreatable)
        return target.plan_recreation(None, move=False)

    def own_apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        target = ctx.target
        assert isinstance(target, PodRecreatable)
        was = pods.before(ctx)
        applied = ctx.now()
        facts = pods.recreate(ctx, None)
        return Applied(applied, ctx.now(), facts=facts, before={"pod": was})

    def own_verify(self, ctx: EventContext, spec: EventSpec, applied: Applied) -> Verified:
        return pods.verify_recreated(ctx, applied)[0]


ACTION = DeletePod()
