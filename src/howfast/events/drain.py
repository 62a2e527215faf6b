"""drain=NODE[,for=D] (`k8s://` targets, with --yes): NODE is cordoned (unless it already
was; annotated with the run's label) and the run's server pod, when it runs there, is evicted
through the Eviction API and made again on another node, on the same claims; NODE is
uncordoned at the window's end, else after the load, and in any case when the target stops.
The client pod is kept off NODE from the start. Verified by NODE unschedulable, the server's
pod on another node, and, when it was evicted, a new pod and server holding the same rows."""

from __future__ import annotations

from collections.abc import Mapping

from howfast.errors import Aborted, HowfastError
from howfast.events import pods
from howfast.events.base import Applied, EventAction, EventContext, Verified
from howfast.eventspec import ActionSyntax, EventSpec
from howfast.model import JSONValue
from howfast.targets.base import Target
from howfast.targets.capabilities import Drainable, PodRecreatable


class Drain(EventAction):
    syntax = ActionSyntax(
        "drain",
        "node",
        arg_required=True,
        takes_for=True,
        disturbs_service=True,
        new_address=True,
        order=100,
    )
    summary = "a node cordoned, the server's pod evicted from it"
    docs = "docs/events.md#the-actions"
    needs = "a server in a pod howfast created (a k8s:// target)"
    requires = (Drainable, PodRecreatable)
    trials_refusal = (
        "drain leaves the server's pod on another node, and howfast does not move it back "
        "between trials: a next trial would not start from the same state"
    )

    def refusal(self, target: Target, spec: EventSpec) -> str | None:
        assert isinstance(target, Drainable) and spec.arg is not None
        return target.plan_drain(spec.arg)

    def apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        target = ctx.target
        assert isinstance(target, Drainable) and spec.arg is not None
        node = spec.arg
        was = pods.before(ctx)
        applied = ctx.now()
        try:
            facts = target.drain(node, ctx.cancel)
        except Aborted as exc:
            raise HowfastError(f"stopped while draining {node}: {exc}") from None

        def undo() -> Mapping[str, JSONValue]:
            return target.uncordon(node)

        evicted = bool(facts.get("evicted"))
        return Applied(
            applied, ctx.now() if evicted else None, facts=facts, before={"pod": was}, undo=undo
        )

    def verify(self, ctx: EventContext, spec: EventSpec, applied: Applied) -> Verified:
        target = ctx.target
        assert isinstance(target, Drainable) and isinstance(target, PodRecreatable)
        node = str(spec.arg)
        cordoned = target.cordoned(node)
        if applied.facts.get("evicted"):
            checked, now = pods.verify_recreated(ctx, applied)
            evidence = {**checked.evidence, "node_cordoned": cordoned}
            problem = checked.problem
        else:
            now = target.pod_identity()
            evidence = {"node_cordoned": cordoned, "server_node": now.node, "evicted": []}
            problem = None
        if problem is None and not cordoned:
            problem = f"node {node} is not cordoned after the drain"
        if problem is None and now.node == node:
            problem = f"the server's pod still runs on {node}"
        return Verified(problem is None, evidence, problem)


ACTION = Drain()
