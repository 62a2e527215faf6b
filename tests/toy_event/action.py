"""toy-analyze: ANALYZE of pgbench's accounts table on the primary, over SQL. Verified by its
`analyze_count` in pg_stat_user_tables, which the server raises once the ANALYZE is done.

An event action added as one module, outside howfast: everything howfast needs to parse it,
list it in `--event`'s help, check a target for it, apply and verify it is declared here.
"""

from __future__ import annotations

import time

from howfast.events.base import Applied, EventAction, EventContext, Verified
from howfast.eventspec import ActionSyntax, EventSpec
from howfast.model import JSONValue
from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.capabilities import HasServerIdentity

COUNT = "SELECT analyze_count FROM pg_stat_user_tables WHERE relname = %s"
TABLE = "pgbench_accounts"
COUNTER_WAIT_S = 3.0  # the statistics are reported shortly after the command


def analyze_count(conn: Connection, table: str) -> int | None:
    with pgquery.connect(conn) as db:
        row = db.execute(COUNT, (table,)).fetchone()
    return None if row is None else int(str(row[0]))


class ToyAnalyze(EventAction):
    syntax = ActionSyntax("toy-analyze", order=200)  # no value, no for=
    summary = "ANALYZE of pgbench's accounts table on the primary"
    docs = "tests/toy_event/action.py"
    requires = (HasServerIdentity,)
    needs = "a server whose identity howfast reads (a directory target)"

    def apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        conn = ctx.primary()
        before = analyze_count(conn, TABLE)
        applied = ctx.now()
        with pgquery.connect(conn) as db:
            db.execute(f"ANALYZE {TABLE}")
        return Applied(applied, None, facts={"table": TABLE}, before={"count": before})

    def verify(self, ctx: EventContext, spec: EventSpec, applied: Applied) -> Verified:
        before = applied.before["count"]
        assert before is None or isinstance(before, int)
        deadline = time.monotonic() + COUNTER_WAIT_S
        after = analyze_count(ctx.primary(), TABLE)
        while (after or 0) <= (before or 0) and time.monotonic() < deadline:
            ctx.cancel.wait(0.1)
            after = analyze_count(ctx.primary(), TABLE)
        evidence: dict[str, JSONValue] = {
            "analyze_count_before": before,
            "analyze_count_after": after,
        }
        if after is None or (before is not None and after <= before):
            return Verified(False, evidence, f"{TABLE}'s analyze count did not grow")
        return Verified(True, evidence)


ACTION = ToyAnalyze()
