"""partition[=STANDBY][,for=D]: the replication connection between the primary and one standby
(the first by default) cut, as a network partition would: every packet of it dropped, both
ways, by an iptables chain of howfast's (machine/packetfilter.py). The load's connection (a
socket, or 127.0.0.1 with --client tcp) and the other standbys' (each on a loopback address
of its own) are not touched. Lifted at the window's end, else when the step's load is planned
to end (a synchronous primary's commits wait until then, and pgbench with them), and in any
case by the undo after the load, on Ctrl-C and errors; an atexit hook and `howfast cleanup`
(the chain is in the ownership registry before it exists) for the rest.

Verified by the standby's flush position, as the primary sees it, not moving while the
primary's WAL grows, and by packets dropped. What the primary did meanwhile (commits waiting
on SyncRep, the standby's lag growing) is read every 0.5 s and kept in the mark's undo facts;
after the cut, how long the standby took to stream again and catch up.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping

from howfast.errors import HowfastError
from howfast.events import link_cut
from howfast.events import replication_view as view
from howfast.events.base import Applied, EventAction, EventContext, Verified, standby_named
from howfast.eventspec import ActionSyntax, EventSpec
from howfast.machine.packetfilter import Cut, PacketFilter
from howfast.model import JSONValue
from howfast.targets.base import Target
from howfast.targets.capabilities import HasCurrentPrimary, Partitionable

SETTLE_S = 0.3  # what was in the standby's socket buffer at the cut is consumed meanwhile
VERIFY_OVER_S = 1.0
STREAMING_AGAIN_TIMEOUT_S = 20.0
POLL_S = 0.1


def standby_of(target: Target, spec: EventSpec) -> str | None:
    names = target.partitionable_standbys() if isinstance(target, Partitionable) else ()
    return standby_named(names, spec)


class Partition(EventAction):
    syntax = ActionSyntax("partition", "standby", takes_for=True, order=75)
    summary = "the replication connection between the primary and a standby cut"
    docs = "docs/events.md#partitions"
    # at or after a failover in the step there is no standby left to cut off
    on_old_primary = True
    needs = "standbys howfast started on this machine (a directory or an emulated volume)"
    requires = (Partitionable, HasCurrentPrimary)

    def missing(self, target: Target) -> str | None:
        if target.kind == "k8s":
            return (
                "partition is not available on k8s:// targets yet (cutting a standby pod's "
                "replication connection is not built)"
            )
        return super().missing(target)

    def refusal(self, target: Target, spec: EventSpec) -> str | None:
        assert isinstance(target, Partitionable)
        names = target.partitionable_standbys()
        if not names:
            return "partition needs standbys to cut off (--replicas N): this target has none"
        if standby_of(target, spec) is None:
            return f"there is no {spec.arg} to cut off (the standbys: {', '.join(names)})"
        why = PacketFilter().unusable()
        return f"partition cuts packets with iptables: {why}" if why else None

    def apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        target = ctx.target
        assert isinstance(target, Partitionable) and isinstance(target, HasCurrentPrimary)
        standby = standby_of(target, spec)
        found = target.replication_cut(standby) if standby else None
        if standby is None or found is None:
            raise HowfastError(f"no standby {spec.arg} to cut off")
        cut = Cut(*found)
        primary = target.connection_now()
        standby_conn = target.standby_connection(standby)
        before = view.read(primary, standby, standby_conn)
        packets = PacketFilter()
        applied = ctx.now()
        chain = link_cut.cut_link(packets, cut)
        cut_at = time.monotonic()
        lifted: dict[str, JSONValue] = {}
        lifted_at: list[float] = []  # monotonic: "streaming again" counts from there

        def lift(when: str) -> None:
            if not link_cut.is_cut(chain):
                return
            dropped = packets.dropped(chain)
            if link_cut.remove(packets, chain):
                lifted.update({when: round(ctx.now(), 6), "dropped_packets": dropped})
                lifted_at.append(time.monotonic())

        def reading() -> view.Reading:
            """Of the primary that was cut: after a failover, the promoted standby is no
            longer the one cut off (its readings are missed)."""
            if target.replication_cut(standby) != found:
                return view.Reading(time.monotonic(), "unknown")
            return view.read(target.connection_now(), standby, standby_conn)

        deadline = None
        if spec.ends_s is None:  # until the load's planned end, then lifted by the watcher
            deadline = cut_at + max(0.0, ctx.load_s - applied)
        watcher = view.Watcher(
            reading,
            deadline=deadline,
            at_deadline=lambda: _quietly(lift, "lifted_at_load_end_s"),
        )
        watcher.start()

        def undo() -> Mapping[str, JSONValue]:
            watcher.stop()
            at_end = watcher.last if "lifted_at_load_end_s" in lifted else reading()
            lift("lifted_s")
            facts: dict[str, JSONValue] = {
                **lifted,
                **watcher.document(),
                "at_lift": at_end.document() if at_end is not None else None,
                "chain_left": packets.chain_exists(chain),
            }
            since = lifted_at[0] if lifted_at else time.monotonic()
            facts.update(_streaming_again(ctx, target, standby, cut, since))
            return facts

        facts: dict[str, JSONValue] = {
            "standby": standby,
            "address": cut.address,
            "primary_port": cut.port,
            "chain": chain,
            "before": before.document(),
        }
        return Applied(applied, None, facts=facts, before={"chain": chain}, undo=undo)

    def verify(self, ctx: EventContext, spec: EventSpec, applied: Applied) -> Verified:
        target = ctx.target
        assert isinstance(target, Partitionable) and isinstance(target, HasCurrentPrimary)
        standby = str(applied.facts["standby"])
        chain = str(applied.before["chain"])
        standby_conn = target.standby_connection(standby)
        ctx.cancel.wait(SETTLE_S)
        first = view.read(target.connection_now(), standby, standby_conn)
        ctx.cancel.wait(VERIFY_OVER_S)
        last = view.read(target.connection_now(), standby, standby_conn)
        dropped = PacketFilter().dropped(chain)
        evidence: dict[str, JSONValue] = {
            "dropped_packets": dropped,
            "over_s": VERIFY_OVER_S,
            "first": first.document(),
            "last": last.document(),
            "primary_wal_growth_bytes": _growth(first.current_lsn, last.current_lsn),
            "standby_flush_growth_bytes": _growth(first.flush_lsn, last.flush_lsn),
            "standby_received_growth_bytes": _growth(first.received_lsn, last.received_lsn),
        }
        if dropped is None:
            return Verified(False, evidence, f"the chain {chain} is not there")
        flushed = evidence["standby_flush_growth_bytes"]
        received = evidence["standby_received_growth_bytes"]
        if isinstance(flushed, int) and flushed > 0:
            return Verified(False, evidence, f"{standby} flushed {flushed:,} bytes during the cut")
        if isinstance(received, int) and received > 0:
            return Verified(
                False, evidence, f"{standby} received {received:,} bytes during the cut"
            )
        if dropped == 0:
            return Verified(False, evidence, "no packet of the connection was dropped")
        return Verified(True, evidence)


def _growth(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else b - a


def _streaming_again(
    ctx: EventContext, target: Partitionable, standby: str, cut: Cut, since: float
) -> dict[str, JSONValue]:
    """After the lift: how long until the primary sees the standby streaming and flushed to
    where the primary's WAL was at the lift. Not waited for when the primary is no longer the
    one cut (a failover promoted a server during the cut) or on Ctrl-C."""
    assert isinstance(target, HasCurrentPrimary)
    if target.replication_cut(standby) != (cut.address, cut.port):
        return {"streaming_again": "the primary changed during the cut (a failover)"}
    began = time.monotonic()
    conn = target.connection_now()
    # where the primary's WAL stands now (at the lift, or later when the cut was lifted at
    # the load's planned end): the standby has streamed again once it has flushed that
    target_lsn = view.read(conn, standby, None).current_lsn
    while not ctx.cancel.cancelled:
        now = view.read(conn, standby, None)
        flushed = now.flush_lsn
        if (
            now.state == "streaming"
            and flushed is not None
            and (target_lsn is None or flushed >= target_lsn)
        ):
            return {"streaming_again_s": round(time.monotonic() - since, 3)}
        if time.monotonic() - began > STREAMING_AGAIN_TIMEOUT_S:
            return {
                "streaming_again": f"not within {STREAMING_AGAIN_TIMEOUT_S:g} s",
                "state_then": now.state or "not connected",
            }
        ctx.cancel.wait(POLL_S)
    return {"streaming_again": "not waited for (cancelled)"}


def _quietly(lift: Callable[[str], None], when: str) -> None:
    """In the watcher's thread: a lift that failed is tried again by the undo."""
    with contextlib.suppress(HowfastError):
        lift(when)


ACTION = Partition()
