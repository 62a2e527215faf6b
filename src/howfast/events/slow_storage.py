"""slow-storage=LATENCY[,for=D]: an emulated volume's added latency changed while the server
runs (the delay plugin reads its delay file again within 50 ms); restored at the window's end,
or after the load without for=. Verified by timing flushes of the volume before and after (the
shortest of each nine): the change measured goes the way asked and is at least half of it. No
upper bound: while the load runs, a flush also waits for the writes queued before it, each
delayed too, so under load it measures a multiple of the change (+7.6 ms and +16 ms measured
for +5 ms at 1 client)."""

from __future__ import annotations

from collections.abc import Mapping

from howfast.events.base import Applied, EventAction, EventContext, Verified
from howfast.eventspec import ActionSyntax, EventSpec
from howfast.model import JSONValue
from howfast.targets.base import Target
from howfast.targets.capabilities import StorageSlowable

# The shortest of 9 flushes, before and after: a flush under load also waits for the writes
# queued before it and for the busy disk below (a CI run measured a median of 17 ms at +0 ms
# and 11 ms at +5 ms), while the delay is under every flush.
FLUSHES = 9
SETTLE_S = 0.15  # the plugin looks at its delay file every 50 ms
# The measured change, as a share of the asked one, that verifies it (no upper bound: above).
AT_LEAST = 0.5


class SlowStorage(EventAction):
    syntax = ActionSyntax("slow-storage", "latency", arg_required=True, takes_for=True, order=50)
    summary = "an emulated volume's added latency changed"
    docs = "docs/events.md#the-actions"
    on_old_primary = True
    requires = (StorageSlowable,)
    acts_on_promoted = False  # the volume it slows is the first primary's, not a promoted one's
    # The undo restores the latency, then times flushes (a settle and FLUSHES of them): the
    # window ends at the restore. Ended after the timing, the "during" figures took in the
    # restored load's fast transactions: 0.26 s of them, ~100 against ~140 delayed ones, under
    # load once more than half (a median of 0.94 ms "during" +5 ms, against 0.79 ms before).
    window_ends_as_undo_begins = True

    def missing(self, target: Target) -> str | None:
        if isinstance(target, StorageSlowable):
            return None
        return (
            "slow-storage changes an emulated volume's latency: give --storage-latency (0ms works)"
        )

    def apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        target = ctx.target
        assert isinstance(target, StorageSlowable) and spec.latency_ms is not None
        was = target.added_latency_ms()
        flush_before = target.measure_flush_ms(FLUSHES)
        applied = ctx.now()
        target.set_added_latency(spec.latency_ms)

        def undo() -> Mapping[str, JSONValue]:
            target.set_added_latency(was)
            ctx.cancel.wait(SETTLE_S)
            return {
                "restored_ms": was,
                "flush_ms_after": round(target.measure_flush_ms(FLUSHES), 3),
            }

        facts: dict[str, JSONValue] = {
            "latency_ms_before": was,
            "latency_ms": spec.latency_ms,
            "flush_ms_before": round(flush_before, 3),
        }
        return Applied(applied, None, facts=facts, undo=undo)

    def verify(self, ctx: EventContext, spec: EventSpec, applied: Applied) -> Verified:
        target = ctx.target
        assert isinstance(target, StorageSlowable) and spec.latency_ms is not None
        ctx.cancel.wait(SETTLE_S)
        after = target.measure_flush_ms(FLUSHES)
        before = float(str(applied.facts["flush_ms_before"]))
        asked = spec.latency_ms - float(str(applied.facts["latency_ms_before"]))
        measured = after - before
        evidence: dict[str, JSONValue] = {
            "flush_ms_before": round(before, 3),
            "flush_ms_after": round(after, 3),
            "change_asked_ms": round(asked, 3),
            "change_measured_ms": round(measured, 3),
        }
        if asked and measured / asked < AT_LEAST:
            return Verified(
                False,
                evidence,
                f"a flush took {before:.2f} ms before and {after:.2f} ms after: a change of "
                f"{measured:+.2f} ms where {asked:+.2f} ms was asked (at least half of it "
                "expected)",
            )
        return Verified(True, evidence)


ACTION = SlowStorage()
