"""move[=NODE] (`k8s://` targets): the server's pod is deleted and made again on another node
(NODE, else the first other node that takes pods) on the same claims, which must be reachable
there (network storage). Refused before anything starts on a cluster with one schedulable
node, a node that does not exist, an emptyDir, a class whose volumes stay on their node (as
the class says, or the bound volume once the pod runs: still before the first step).
Verified as delete-pod, and by the pod running on the node it was sent to."""

from __future__ import annotations

from howfast.errors import HowfastError
from howfast.events import pods
from howfast.events.base import Applied, EventAction, EventContext, Verified
from howfast.eventspec import ActionSyntax, EventSpec
from howfast.targets.base import Target
from howfast.targets.capabilities import PodRecreatable
from howfast.targets.k8s.moves import destination


class Move(EventAction):
    syntax = ActionSyntax("move", "node", disturbs_service=True, new_address=True, order=90)
    summary = "the server's pod made again on another node"
    docs = "docs/events.md#the-actions"
    needs = "a server in a pod howfast created (a k8s:// target)"
    requires = (PodRecreatable,)
    trials_refusal = (
        "move leaves the server's pod on another node, and howfast does not move it back "
        "between trials: a next trial would not start from the same state"
    )

    def refusal(self, target: Target, spec: EventSpec) -> str | None:
        assert isinstance(target, PodRecreatable)
        return target.plan_recreation(spec.arg, move=True)

    def apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        target = ctx.target
        assert isinstance(target, PodRecreatable)
        was = pods.before(ctx)
        try:
            node = destination(spec.arg, target.schedulable_nodes(), was.identity.node or "")
        except ValueError as exc:
            raise HowfastError(f"move: {exc}") from None
        applied = ctx.now()
        facts = pods.recreate(ctx, node)
        return Applied(applied, ctx.now(), facts=facts, before={"pod": was, "node": node})

    def verify(self, ctx: EventContext, spec: EventSpec, applied: Applied) -> Verified:
        checked, now = pods.verify_recreated(ctx, applied)
        sent = applied.before.get("node")
        evidence = {**checked.evidence, "node_asked": spec.arg, "node_sent_to": str(sent)}
        if not checked.ok:
            return Verified(False, evidence, checked.problem)
        if now.node != sent:
            return Verified(False, evidence, f"the pod runs on {now.node}, not on {sent}")
        return Verified(True, evidence)


ACTION = Move()
