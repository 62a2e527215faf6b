"""failover[=STANDBY]: the primary dies like a failed node and a standby (the first by default)
is promoted; the load follows it (its connection lists every server, libpq takes the one that
accepts writes). Verified by the new primary out of recovery on a later timeline, the old
postmaster gone."""

from __future__ import annotations

from howfast.errors import HowfastError
from howfast.events.base import Applied, EventContext, Verified
from howfast.events.operator import OperatorAware
from howfast.eventspec import ActionSyntax, EventSpec
from howfast.model import JSONValue
from howfast.store.liveness import pid_exists
from howfast.targets import pgquery
from howfast.targets.base import Connection, Target
from howfast.targets.capabilities import HasCurrentPrimary, Promotable
from howfast.targets.replicas import failover
from howfast.targets.replicas.builders import STATE_QUERY
from howfast.targets.replicas.state import parse_state


def standby_of(target: Target, spec: EventSpec) -> str | None:
    names = target.promotable_standbys() if isinstance(target, Promotable) else ()
    if spec.arg is not None:
        return spec.arg if spec.arg in names else None
    return names[0] if names else None


class Failover(OperatorAware):
    syntax = ActionSyntax("failover", "standby", disturbs_service=True, order=70)
    summary = "the primary dies and a standby is promoted"
    docs = "docs/events.md#the-actions"
    on_old_primary = True
    replaces_primary = True
    needs = "standbys howfast started on this machine (a directory or an emulated volume)"
    requires = (Promotable, HasCurrentPrimary)

    def own_refusal(self, target: Target, spec: EventSpec) -> str | None:
        assert isinstance(target, Promotable)
        names = target.promotable_standbys()
        if not names:
            return "failover needs standbys to promote (--replicas N): this target has none"
        if len(names) > 1:
            return (
                "failover with more than one standby is not available yet (the others would "
                "have to follow the new primary): give --replicas 1"
            )
        if standby_of(target, spec) is None:
            return f"there is no {spec.arg} to promote (the standbys: {', '.join(names)})"
        return target.failover_refusal()

    def own_apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        target = ctx.target
        assert isinstance(target, Promotable) and isinstance(target, HasCurrentPrimary)
        standby = standby_of(target, spec)
        if standby is None:
            raise HowfastError(f"no standby {spec.arg} to promote")
        before = failover.primary_state(target.connection_now())
        # What the primary said of the standby just before it died: why commits may be lost
        # (asynchronous, behind, not connected) is in the record.
        seen = standby_seen(target.connection_now(), standby)
        applied = ctx.now()
        facts = {**target.fail_over(standby), "standby_before": seen}
        back = ctx.now()
        return Applied(applied, back, facts=facts, before={"timeline": before[1]})

    def own_verify(self, ctx: EventContext, spec: EventSpec, applied: Applied) -> Verified:
        target = ctx.target
        assert isinstance(target, HasCurrentPrimary)
        in_recovery, timeline = failover.primary_state(target.connection_now())
        killed = applied.facts.get("killed_pid")
        evidence: dict[str, JSONValue] = {
            "promoted": applied.facts.get("promoted"),
            "in_recovery_after": in_recovery,
            "timeline_before": _int(applied.before.get("timeline")),
            "timeline_after": timeline,
            "old_primary_gone": isinstance(killed, int) and not pid_exists(killed),
        }
        before = applied.before.get("timeline")
        if in_recovery:
            return Verified(False, evidence, "the promoted standby is still in recovery")
        if not isinstance(before, int) or timeline <= before:
            return Verified(False, evidence, f"the timeline did not grow ({before} → {timeline})")
        if not evidence["old_primary_gone"]:
            return Verified(False, evidence, f"the old primary (pid {killed}) still runs")
        return Verified(True, evidence)


def standby_seen(conn: Connection, name: str) -> dict[str, JSONValue]:
    """The standby's row of the primary's pg_stat_replication: its state, sync state and how
    many bytes of WAL the primary had written that it had not flushed (`unflushed_bytes`), not
    written (`unwritten_bytes`: not even in its OS's cache) and not been sent
    (`unsent_bytes`); `not connected` when it has no row; `unknown` (with why) when the
    primary did not answer. Only the primary dies in a failover: what the standby received,
    flushed or not, it keeps, so an acknowledged commit can be lost only while its WAL is
    unsent (docs/events.md)."""
    import psycopg  # here: finding the actions (`--event`'s help) must not load the driver

    try:
        with pgquery.connect(conn, timeout_s=5) as db:
            states = parse_state(db.execute(STATE_QUERY).fetchall())
    except (HowfastError, psycopg.Error, ValueError) as exc:
        return {"state": "unknown", "problem": str(exc)}
    state = states.get(name)
    if state is None:
        return {"state": "not connected"}

    def behind(lsn: int | None) -> int | None:
        return None if lsn is None else max(0, state.current_lsn - lsn)

    return {
        "state": state.state,
        "sync_state": state.sync_state,
        "unflushed_bytes": behind(state.flush_lsn),
        "unwritten_bytes": behind(state.write_lsn),
        "unsent_bytes": behind(state.sent_lsn),
    }


def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None


ACTION = Failover()
