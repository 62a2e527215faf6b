"""failover[=STANDBY]: the primary dies like a failed node and a standby (the first by default)
is promoted; the load follows it (its connection lists every server, libpq takes the one that
accepts writes). Verified by the new primary out of recovery on a later timeline, the old
postmaster gone."""

from __future__ import annotations

import time

from howfast.errors import HowfastError
from howfast.events import link_cut
from howfast.events.base import Applied, EventContext, Verified, standby_named
from howfast.events.operator import OperatorAware
from howfast.eventspec import ActionSyntax, EventSpec
from howfast.machine import tcp_queues
from howfast.machine.packetfilter import Cut, PacketFilter
from howfast.model import JSONValue
from howfast.store.liveness import pid_exists
from howfast.targets import pgquery
from howfast.targets.base import Connection, Target
from howfast.targets.capabilities import HasCurrentPrimary, Partitionable, Promotable
from howfast.targets.replicas import failover
from howfast.targets.replicas.builders import STATE_QUERY
from howfast.targets.replicas.state import parse_state


def standby_of(target: Target, spec: EventSpec) -> str | None:
    names = target.promotable_standbys() if isinstance(target, Promotable) else ()
    return standby_named(names, spec)


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
        link = NodeLink.of(target, standby)
        applied = ctx.now()
        try:
            done = target.fail_over(standby, link.cut if link.cut_to is not None else None)
        finally:
            link.lift()
        facts = {**done, "standby_before": seen, **link.facts}
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


class NodeLink:
    """The dead node's network: a failed node sends nothing more, but a killed process's
    kernel still delivers what the process had written into its socket. So, where the packet
    filter can be changed (root, iptables) and the standby replicates over a connection of
    its own (Partitionable), its replication connection is cut (link_cut.py, as a partition
    does) while the primary's processes are stopped, just before they are killed, and the
    cut lifted once the standby is promoted. Elsewhere the kill alone, and the facts say that
    WAL the kernel held may still reach the standby (loss may be under-counted)."""

    def __init__(self, cut_to: Cut | None, why_not: str | None) -> None:
        self.cut_to = cut_to
        self.packets = PacketFilter()
        self.chain: str | None = None
        self.facts: dict[str, JSONValue] = {"link_cut": False}
        if why_not is not None:
            self.facts["link_not_cut"] = f"{why_not}: {KERNEL_MAY_DELIVER}"

    @classmethod
    def of(cls, target: Target, standby: str) -> NodeLink:
        found = target.replication_cut(standby) if isinstance(target, Partitionable) else None
        if found is None:
            return cls(None, "the standby's replication connection is not one of its own")
        why = PacketFilter().unusable()
        return cls(None, why) if why is not None else cls(Cut(*found), None)

    def cut(self) -> None:
        """While the primary's processes are stopped: what the kernel queued, then the cut.
        A cut that fails is recorded, not raised: the kill goes on (a failover half done
        would leave no primary)."""
        assert self.cut_to is not None
        began = time.monotonic()
        queued = tcp_queues.read(self.cut_to.address, self.cut_to.port)
        if queued is not None:
            self.facts["queued_at_kill"] = {
                "primary_unacknowledged_bytes": queued.server_tx,
                "standby_unread_bytes": queued.client_rx,
            }
        try:
            self.chain = link_cut.cut_link(self.packets, self.cut_to)
        except HowfastError as exc:
            self.facts["link_not_cut"] = f"{exc}: {KERNEL_MAY_DELIVER}"
            return
        self.facts.update(
            {
                "link_cut": True,
                "link": {
                    "address": self.cut_to.address,
                    "primary_port": self.cut_to.port,
                    "chain": self.chain,  # howfast's iptables chain: `iptables -S` names it
                },
                "link_cut_s": round(time.monotonic() - began, 3),
            }
        )

    def lift(self) -> None:
        """After the promotion (or a failure): the chain removed, its drops counted."""
        if self.chain is None:
            return
        self.facts["link_dropped_packets"] = self.packets.dropped(self.chain)
        try:
            link_cut.remove(self.packets, self.chain)
        except HowfastError as exc:  # tried again at exit, and by `howfast cleanup`
            self.facts["link_lift_failed"] = str(exc)
        self.facts["link_left"] = self.packets.chain_exists(self.chain)


KERNEL_MAY_DELIVER = (
    "the primary's processes were killed with no link cut, so WAL its kernel had queued may "
    "still have reached the standby (loss may be under-counted)"
)


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
