"""cap-iops=N[,for=D]: the server's read and write IOPS capped at N each, on the disks under
its data and WAL, through the cgroup its own I/O is counted in (cgroup v1 blkio.throttle, v2
io.max); lifted at the window's end (or the step's), restoring the rules from before.
Verified by reading the rules back, and by the server's own IOPS in the second after the
cap: at most 1.2 x N when it did I/O. On cgroup v1 buffered writeback is not throttled (it
is charged to no cgroup): the WAL's and the data's flushes are, the background writes not."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from howfast.events.base import Applied, EventAction, EventContext, Verified
from howfast.eventspec import ActionSyntax, EventSpec
from howfast.iolimits import iops_cap_files
from howfast.model import JSONValue
from howfast.targets.capabilities import IoCappable

MEASURE_S = 1.0
TOLERANCE = 1.2
V1_NOTE = "cgroup v1: buffered writeback is not throttled (charged to no cgroup)"


class CapIops(EventAction):
    syntax = ActionSyntax("cap-iops", "iops", arg_required=True, takes_for=True, order=60)
    summary = "the server's read and write IOPS capped"
    docs = "docs/events.md#the-actions"
    on_old_primary = True
    requires = (IoCappable,)
    acts_on_promoted = False  # refused on a promoted standby (targets/local/takeover.py)

    def missing(self, target: object) -> str | None:
        if isinstance(target, IoCappable):
            return None
        return "cap-iops needs a server howfast started on this machine (its I/O cgroup)"

    def apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        target = ctx.target
        assert isinstance(target, IoCappable) and spec.iops is not None
        applied = ctx.now()
        facts = dict(target.cap_iops(spec.iops))
        began = time.monotonic()  # after the cap: its I/O count was taken before this

        def undo() -> Mapping[str, JSONValue]:
            during = target.server_iops_since(began)
            lifted = dict(target.cap_iops(None))
            return {**lifted, "server_iops_during": None if during is None else round(during, 1)}

        return Applied(applied, None, facts=facts, before={"began": began}, undo=undo)

    def verify(self, ctx: EventContext, spec: EventSpec, applied: Applied) -> Verified:
        target = ctx.target
        assert isinstance(target, IoCappable) and spec.iops is not None
        group = Path(str(applied.facts["cgroup"]))
        version = str(applied.facts["cgroup_version"])
        lines = applied.facts.get("lines")
        wanted = [str(line) for line in lines] if isinstance(lines, list) else []
        rules = "\n".join((group / name).read_text() for name in iops_cap_files(version))
        evidence: dict[str, JSONValue] = {"rules": rules.strip()}
        if version == "v1":
            evidence["note"] = V1_NOTE
        held = [line for line in wanted if _holds(rules, line)]
        if len(held) != len(wanted):
            return Verified(False, evidence, "the cgroup does not hold the cap's rules")
        ctx.cancel.wait(MEASURE_S)  # the server's IOPS from the cap to a second after it
        measured = _iops_over(target, applied)
        evidence["server_iops_after_cap"] = measured
        if measured is not None and measured > TOLERANCE * spec.iops:
            return Verified(
                False, evidence, f"the server did {measured:,.0f} IOPS under a cap of {spec.iops}"
            )
        return Verified(True, evidence)


def _iops_over(target: IoCappable, applied: Applied) -> float | None:
    began = applied.before.get("began")
    assert isinstance(began, float)
    value = target.server_iops_since(began)
    return None if value is None else round(value, 1)


def _holds(rules: str, line: str) -> bool:
    """Whether the rules read back hold `line` (v2 io.max shows only the fields set, with
    their values; v1 one "MAJ:MIN value" per line)."""
    words = line.split()
    for rule in rules.splitlines():
        have = rule.split()
        if have[:1] == words[:1] and all(w in have or w.endswith("=max") for w in words[1:]):
            return True
    return False


ACTION = CapIops()
