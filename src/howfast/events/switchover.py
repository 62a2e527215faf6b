"""switchover[=STANDBY] (`cnpg://` targets): a planned change of primary through the
operator, `kubectl cnpg promote`'s request (the Cluster's status.targetPrimary) to the named
standby, else to the one the primary had flushed furthest; the operator shuts the primary
down cleanly, promotes the standby and moves the -rw Service, which the load follows.
Verified by another instance serving out of recovery, on a later timeline."""

from __future__ import annotations

from howfast.events.operator import OperatorAware
from howfast.eventspec import ActionSyntax
from howfast.targets.capabilities import OperatorManaged


class Switchover(OperatorAware):
    syntax = ActionSyntax("switchover", "standby", disturbs_service=True, order=75)
    summary = "a planned change of primary through the operator"
    docs = "docs/events.md#the-actions"
    on_old_primary = True
    replaces_primary = True
    needs = "a cluster an operator runs (a cnpg:// target)"
    requires = (OperatorManaged,)


ACTION = Switchover()
