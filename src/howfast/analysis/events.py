"""The figures of each event of a step (docs/events.md): how long the service was gone, how
long TPS took to come back, TPS and p99 latency before and after, failed transactions, and
acknowledged commits lost. Pure: from the event marks and the load record a step stores
(analysis/loadrecord.py), and the latency histograms of each event's windows, which the
load's executor computes at run time with `windows()`.

For an event applied at `a` (seconds into the load):
- downtime: the longest stretch without commits overlapping [a, (back or undone or a) + 1],
  from the last commit before to the first after; 0 when there is none (a checkpoint);
- baseline: the whole seconds of [max(1, a - 30, the end of the previous event), a); fewer
  than 3 and there is no recovery figure;
- recovery: from `a` (a `for=` action: from its end, the slowness undone) to the end of the
  first one-second window, starting after the outage and moved on by tenths of a second, whose
  TPS is at least 90% of the baseline's and whose next second's is too (when there is a next
  second in the step);
- after: [recovery point, the next event, the point + 30 s, the load's end), the earliest;
  without a recovery, from the end of the outage; during (`for=`): [a + 1, undone);
- failed transactions: pgbench's failed ones plus one per client the server cut, in segments
  that ended from this event's application to the next's; failed connects apart;
- lost commits: the load is cut in windows within each disturbing event's outage, between two
  segments (no transaction is open there); in the window that ends at an event's cut,
  `acked - rows` commits are proven lost and up to `acked - rows + in_doubt` may be (a client
  cut during its COMMIT).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from howfast.analysis.loadrecord import BIN_S, Gap, HistoryCount, LoadRecord, SegmentFacts
from howfast.event_marks import EventMark, marks_from_section
from howfast.model import JSONValue
from howfast.plugin.events import disturbs_service
from howfast.units import plain_number

BASELINE_S = 30
MIN_BASELINE_S = 3
RECOVERY_FRACTION = 0.9
AFTER_S = 30.0
METHOD = "pgbench_history rows vs acknowledged commits"

Window = tuple[float | None, float | None]


@dataclass(frozen=True)
class LostCommits:
    window: Window
    acked: int
    rows: int
    in_doubt: int

    @property
    def lost(self) -> int:
        """Proven: this many acknowledged commits are not in the database."""
        return max(0, self.acked - self.rows)

    @property
    def lost_max(self) -> int:
        """If every in-doubt commit survived, it hid one lost acknowledged commit."""
        return max(0, self.acked - self.rows + self.in_doubt)


@dataclass(frozen=True)
class EventFigures:
    mark: EventMark
    gap: Gap | None = None
    downtime_s: float | None = None
    downtime_resolution_ms: float | None = None
    baseline_s: int = 0
    tps_before: float | None = None
    tps_after: float | None = None
    tps_during: float | None = None
    p99_before_ms: float | None = None
    p99_after_ms: float | None = None
    p99_during_ms: float | None = None
    recovery_s: float | None = None
    recovery_note: str | None = None
    failed_transactions: int = 0
    failed_connects: int = 0
    lost: LostCommits | None = None
    lost_note: str | None = None  # why lost commits are not given for this event
    cause: str | None = None  # another event that explains this one's loss (a partition)

    def document(self) -> dict[str, JSONValue]:
        m = self.mark
        lost = self.lost
        return {
            "index": m.index,
            "text": m.text,
            "action": m.action,
            "at_s": m.at_s,
            "applied_s": m.applied_s,
            "back_s": m.back_s,
            "undone_s": m.undone_s,
            "verified": m.verified,
            "evidence": dict(m.evidence),
            "problem": m.problem,
            "error": m.error,
            "skipped": m.skipped,
            "downtime_s": _round(self.downtime_s, 3),
            "downtime_until_end": self.gap is not None and not self.gap.closed,
            "downtime_resolution_ms": _round(self.downtime_resolution_ms, 3),
            "recovery_s": _round(self.recovery_s, 2),
            "recovery_note": self.recovery_note,
            "baseline_s": self.baseline_s,
            "tps_before": _round(self.tps_before, 1),
            "tps_after": _round(self.tps_after, 1),
            "tps_during": _round(self.tps_during, 1),
            "p99_before_ms": self.p99_before_ms,
            "p99_after_ms": self.p99_after_ms,
            "p99_during_ms": self.p99_during_ms,
            "failed_transactions": self.failed_transactions,
            "failed_connects": self.failed_connects,
            "lost_commits": lost.lost if lost else None,
            "lost_commits_max": lost.lost_max if lost else None,
            "in_doubt": lost.in_doubt if lost else None,
            "lost_commits_method": METHOD if lost else self.lost_note,
            "line": event_line(self),
        }


# --- downtime --------------------------------------------------------------------------------


def event_gap(mark: EventMark, gaps: Sequence[Gap]) -> Gap | None:
    """The longest stretch without commits overlapping [applied, (back or undone or applied) +
    1]; None when the event was not applied or no such stretch exists."""
    if mark.applied_s is None:
        return None
    lo = mark.applied_s
    hi = (mark.back_s or mark.undone_s or mark.applied_s) + 1
    touching = [g for g in gaps if g.t0 <= hi and g.t1 >= lo]
    return max(touching, key=lambda g: g.length, default=None)


# --- windows of time -------------------------------------------------------------------------


def _ceil_bin(t: float) -> float:
    return math.ceil(t / BIN_S - 1e-9) * BIN_S


def _outage_end(mark: EventMark, gap: Gap | None) -> float:
    """Where recovery is looked for from: the first commit after the outage, or when the
    action (or its for= window) ended."""
    start = mark.undone_s if mark.undone_s is not None else mark.applied_s
    if start is None:
        start = mark.at_s
    return max(start, gap.t1) if gap is not None else start


def _baseline(mark: EventMark, previous_end: float | None) -> tuple[float, float] | None:
    """[lo, hi) in whole seconds before the event."""
    applied = mark.applied_s if mark.applied_s is not None else mark.at_s
    lo = max(1.0, applied - BASELINE_S, math.ceil(previous_end or 0.0))
    lo = float(math.ceil(lo))
    hi = float(math.floor(applied))
    return (lo, hi) if hi > lo else None


def _recovery(
    load: LoadRecord, mark: EventMark, gap: Gap | None, before: float | None
) -> tuple[float | None, str | None, float | None]:
    """(recovery_s, why none, the recovery point in load seconds)."""
    start = mark.undone_s if mark.undone_s is not None else mark.applied_s
    if start is None:
        return None, "not applied", None
    if before is None or before <= 0:
        return None, "no TPS before the event to recover to", None
    if gap is not None and not gap.closed:
        return None, "no service until the step's end", None
    t = _ceil_bin(_outage_end(mark, gap))
    end = load.end_s
    while t + 1 <= end + 1e-9:
        this = load.tps(t, t + 1)
        if this is not None and this >= RECOVERY_FRACTION * before:
            following = load.tps(t + 1, t + 2) if t + 2 <= end + 1e-9 else None
            if following is None or following >= RECOVERY_FRACTION * before:
                return t + 1 - start, None, t + 1
        t = round(t + BIN_S, 6)
    after = max(0.0, end - start)
    return None, f"not back to 90% within the step ({after:.0f} s after)", None


@dataclass(frozen=True)
class _Timing:
    gap: Gap | None
    baseline: tuple[float, float] | None
    tps_before: float | None
    recovery_s: float | None
    recovery_note: str | None
    after: tuple[float, float] | None
    during: tuple[float, float] | None


def _timings(marks: Sequence[EventMark], load: LoadRecord) -> list[_Timing]:
    timings: list[_Timing] = []
    previous_end: float | None = None
    for i, mark in enumerate(marks):
        gap = event_gap(mark, load.gaps)
        if mark.applied_s is None:
            timings.append(_Timing(gap, None, None, None, "not applied", None, None))
            continue
        baseline = _baseline(mark, previous_end)
        seconds = int(baseline[1] - baseline[0]) if baseline else 0
        before = load.tps(*baseline) if baseline else None
        recovery_s: float | None = None
        point: float | None = None
        if seconds < MIN_BASELINE_S:
            note: str | None = (
                f"not enough seconds before the event ({seconds} s; {MIN_BASELINE_S} needed)"
            )
        else:
            recovery_s, note, point = _recovery(load, mark, gap, before)
        following = next((m.applied_s for m in marks[i + 1 :] if m.applied_s is not None), None)
        after_start = point if point is not None else _ceil_bin(_outage_end(mark, gap))
        after_end = min(after_start + AFTER_S, load.end_s, following or math.inf)
        after = (after_start, after_end) if after_end - after_start >= 1 - 1e-9 else None
        during = None
        if mark.undone_s is not None and mark.undone_s - (mark.applied_s + 1) >= 1 - 1e-9:
            during = (_ceil_bin(mark.applied_s + 1), mark.undone_s)
        timings.append(_Timing(gap, baseline, before, recovery_s, note, after, during))
        previous_end = point if point is not None else _outage_end(mark, gap)
    return timings


def windows(marks: Sequence[EventMark], load: LoadRecord) -> dict[str, tuple[float, float]]:
    """The latency windows of each event, named `event{index}:before|after|during`: the load's
    executor stores a histogram for each (`latency_us:event1:before`...), read back for p99."""
    out: dict[str, tuple[float, float]] = {}
    for mark, timing in zip(marks, _timings(marks, load), strict=True):
        if timing.baseline is not None:
            out[f"event{mark.index}:before"] = timing.baseline
        if timing.after is not None:
            out[f"event{mark.index}:after"] = timing.after
        if timing.during is not None:
            out[f"event{mark.index}:during"] = timing.during
    return out


# --- lost commits ------------------------------------------------------------------------------


def _cuts(marks: Sequence[EventMark], load: LoadRecord) -> dict[int, float]:
    """Event index -> where the load is cut for counting, for each event that cut the service:
    between two segments, where no transaction of the load was open. A pgbench_history row
    carries its transaction's start (mtime = CURRENT_TIMESTAMP), which can come long before
    its commit: a transaction begun as a restarted server came back waits in its COMMIT until
    the synchronous standby has reconnected (5 s). Cut at the middle of the outage, such a row
    fell in the window before while its commit was acknowledged in the one after: a commit
    counted lost in one window and one too many in the other. So the cut is the middle of the
    widest stretch of the outage that no segment which ran covers (a segment's transactions,
    committed or in doubt, start and end within it); none when one spans the outage."""
    spans = sorted(
        (s.started_s, s.ended_s if s.ended_s is not None else load.end_s)
        for s in load.segments
        if s.ran
    )
    cuts: dict[int, float] = {}
    for mark in marks:
        gap = event_gap(mark, load.gaps)
        if not disturbs_service(mark.action) or gap is None or not gap.closed:
            continue
        free = _free_stretches(spans, gap.t0, gap.t1)
        if free:
            lo, hi = max(free, key=lambda f: f[1] - f[0])
            cuts[mark.index] = round((lo + hi) / 2, 6)
    return cuts


def _free_stretches(
    spans: Sequence[tuple[float, float]], t0: float, t1: float
) -> list[tuple[float, float]]:
    """The parts of [t0, t1] that none of `spans` (sorted) covers."""
    free: list[tuple[float, float]] = []
    t = t0
    for lo, hi in spans:
        if hi <= t:
            continue
        if lo >= t1:
            break
        if lo > t:
            free.append((t, lo))
        t = max(t, hi)
    if t < t1:
        free.append((t, t1))
    return free


def commit_windows(marks: Sequence[EventMark], load: LoadRecord) -> list[Window]:
    """The windows in which commits are counted, in order: [None, cut1), [cut1, cut2), ...,
    [cutN, None). The executor counts pgbench_history rows in each after the load."""
    bounds: list[float | None] = [None, *sorted(set(_cuts(marks, load).values())), None]
    return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def _in_window(t: float, window: Window) -> bool:
    lo, hi = window
    return (lo is None or t >= lo) and (hi is None or t < hi)


def lost_in_window(load: LoadRecord, window: Window, rows: int) -> LostCommits:
    ran = [s for s in load.segments if s.ran and _in_window(s.at_s, window)]
    return LostCommits(
        window=window,
        acked=sum(s.acked or 0 for s in ran),
        rows=rows,
        in_doubt=sum(s.in_doubt(load.end_command) for s in ran),
    )


def _rows(history: Sequence[HistoryCount], window: Window) -> int | None:
    for count in history:
        if _same(count.lo_s, window[0]) and _same(count.hi_s, window[1]):
            return count.rows
    return None


def _same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) < 1e-5)


def _lost_commits(
    marks: Sequence[EventMark], load: LoadRecord
) -> dict[int, tuple[LostCommits | None, str | None]]:
    """Event index -> its window's lost commits, or why none are given. A window belongs to
    the event whose cut ends it, else to the last event applied in it; other events in it say
    so."""
    if load.not_counted is not None:
        return {m.index: (None, load.not_counted) for m in marks}
    cuts = _cuts(marks, load)
    out: dict[int, tuple[LostCommits | None, str | None]] = {
        m.index: (None, "not applied") for m in marks if m.applied_s is None
    }
    applied = [m for m in marks if m.applied_s is not None]
    for window in commit_windows(marks, load):
        members = [
            m
            for m in applied
            if (
                cuts[m.index] == window[1]
                if m.index in cuts
                else _in_window(m.applied_s or 0.0, window)
            )
        ]
        if not members:
            continue
        with_cut = [m for m in members if m.index in cuts]
        owner = with_cut[0] if with_cut else members[-1]
        for member in members:
            out[member.index] = (None, f"counted with {owner.text}: one window")
        rows = _rows(load.history, window)
        if rows is None and load.history:
            # counted by a version that cut windows at the outage's middle: not comparable
            out[owner.index] = (None, "pgbench_history was counted in other windows")
        elif rows is None:
            out[owner.index] = (None, "pgbench_history was not counted after the load")
        else:
            out[owner.index] = (lost_in_window(load, window, rows), None)
    return out


# --- figures -----------------------------------------------------------------------------------


def window_p99_ms(histograms: Mapping[str, Mapping[int, int]]) -> dict[str, JSONValue]:
    """The p99 of each event window's latency histogram (`latency_us:event1:before`...), by
    window name: stored beside the marks, for reading a step without its histograms."""
    prefix = "latency_us:"
    return {
        name.removeprefix(prefix): _percentile_ms(h)
        for name, h in histograms.items()
        if name.startswith(prefix + "event")
    }


def _percentile_ms(histogram: Mapping[int, int] | None, p: float = 99.0) -> float | None:
    """The nearest-rank percentile of a {µs: count} histogram, in ms (txlog.py's definition)."""
    if not histogram:
        return None
    total = sum(histogram.values())
    rank = max(1, math.ceil(p * total / 100))
    seen = 0
    for value in sorted(histogram):
        seen += histogram[value]
        if seen >= rank:
            return value / 1000
    return None


def _segments_of(
    marks: Sequence[EventMark], mark: EventMark, load: LoadRecord
) -> list[SegmentFacts]:
    """The segments that ended from this event's application to the next one's."""
    if mark.applied_s is None:
        return []
    following = [
        m.applied_s for m in marks if m.applied_s is not None and m.applied_s > mark.applied_s
    ]
    hi = min(following, default=math.inf)
    return [
        s
        for s in load.segments
        if (s.ended_s if s.ended_s is not None else load.end_s) >= mark.applied_s
        and (s.ended_s if s.ended_s is not None else load.end_s) < hi
    ]


def figures(
    marks: Sequence[EventMark],
    load: LoadRecord,
    histograms: Mapping[str, Mapping[int, int]] | None = None,
    window_p99_ms: Mapping[str, JSONValue] | None = None,
) -> list[EventFigures]:
    """Every event's figures, in order. `histograms`: the step's, with the windows' latency
    histograms under `latency_us:event{index}:before|after|during`; `window_p99_ms`, the p99
    of each window as stored beside the marks (`event1:before`...), for a step read without
    its histograms."""
    histograms = histograms or {}
    stored = window_p99_ms or {}
    lost = _lost_commits(marks, load)
    out = []
    for mark, timing in zip(marks, _timings(marks, load), strict=True):
        gap = timing.gap
        segments = _segments_of(marks, mark, load)

        def p99(name: str, mark: EventMark = mark) -> float | None:
            window = f"event{mark.index}:{name}"
            found = _percentile_ms(histograms.get(f"latency_us:{window}"))
            value = stored.get(window)
            if found is None and isinstance(value, int | float):
                return float(value)
            return found

        applied = mark.applied_s is not None
        lost_commits, lost_note = lost[mark.index]
        out.append(
            EventFigures(
                mark=mark,
                gap=gap,
                downtime_s=(gap.length if gap else 0.0) if applied else None,
                downtime_resolution_ms=load.interval_ms,
                baseline_s=int(timing.baseline[1] - timing.baseline[0]) if timing.baseline else 0,
                tps_before=timing.tps_before,
                tps_after=load.tps(*timing.after) if timing.after else None,
                tps_during=load.tps(*timing.during) if timing.during else None,
                p99_before_ms=p99("before"),
                p99_after_ms=p99("after"),
                p99_during_ms=p99("during"),
                recovery_s=timing.recovery_s,
                recovery_note=timing.recovery_note,
                failed_transactions=sum(s.failed + len(s.aborts) for s in segments),
                failed_connects=sum(1 for s in segments if not s.ran),
                lost=lost_commits,
                lost_note=lost_note,
                cause=partition_cause(mark, marks),
            )
        )
    return out


# --- the verdict line --------------------------------------------------------------------------


def _s(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds:.2f}"
    return f"{seconds:.1f}" if seconds < 10 else f"{seconds:.0f}"


def _label(mark: EventMark) -> str:
    at = f"{plain_number(mark.at_s)} s"
    args = mark.text.partition(":")[2]
    if mark.action == "slow-storage":
        latency = args.partition("=")[2].partition(",")[0]
        text = f"slow-storage +{latency}"
    elif mark.action == "exec":
        text = "exec"
    elif mark.action == "partition":
        standby = args.partition(",")[0].partition("=")[2] or mark.facts.get("standby")
        text = f"partition of {standby or 'the standby'}"
    else:
        text = args.partition(",")[0]
    window = args.partition(",for=")[2]
    if window:
        text += f" for {window.removesuffix('s')} s"
    return f"{text} at {at}"


def _tps(value: float) -> str:
    return f"{value:,.0f}"


def promotion_note(mark: EventMark, lost: LostCommits | None) -> str | None:
    """A failover's promoted standby as the primary saw it just before it died, when that
    can explain lost commits: not streaming, or asynchronous with WAL it had not flushed
    (said when commits are, or may be, lost). None for a synchronous standby that streamed
    (nothing acknowledged can be missing)."""
    seen = mark.facts.get("standby_before")
    name = mark.facts.get("promoted")
    if not isinstance(seen, dict) or not isinstance(name, str):
        return None
    state, sync = seen.get("state"), seen.get("sync_state")
    if state == "unknown":
        return None
    if state != "streaming":
        return f"{name} was {state} when promoted"
    behind = seen.get("unflushed_bytes")
    if sync == "sync" or not isinstance(behind, int) or behind == 0:
        return None
    if lost is not None and lost.lost_max == 0:
        return None
    return f"{name} was {sync} when promoted, {behind:,} bytes of WAL behind"


def _dict(value: object) -> Mapping[str, JSONValue]:
    return value if isinstance(value, Mapping) else {}


def partition_notes(mark: EventMark) -> list[str]:
    """What the primary did while a partition cut its standby off (docs/events.md#partitions):
    commits waiting on SyncRep (a synchronous standby: an outage), or the standby's lag
    growing (asynchronous); then how long it took to stream again after the cut."""
    if mark.action != "partition":
        return []
    undo = _dict(mark.facts.get("undo"))
    sync = _dict(mark.facts.get("before")).get("sync_state")
    standby = mark.facts.get("standby") or "the standby"
    notes = []
    waiting, behind = undo.get("syncrep_waiting_max"), undo.get("unflushed_bytes_max")
    if sync in ("sync", "quorum") and isinstance(waiting, int):
        notes.append(f"commits waited on SyncRep ({waiting} backends at most)")
    elif isinstance(behind, int):
        notes.append(f"{standby} up to {behind:,} bytes of WAL behind")
    again = undo.get("streaming_again_s")
    if isinstance(again, int | float):
        notes.append(f"streaming again {_s(float(again))} s after the cut")
    elif isinstance(undo.get("streaming_again"), str):
        notes.append(f"streaming again: {undo['streaming_again']}")
    return notes


def partition_cause(mark: EventMark, marks: Sequence[EventMark]) -> str | None:
    """For a failover that promoted a standby a partition had cut off (from before the kill
    to after it): what that standby never received."""
    promoted = mark.facts.get("promoted")
    if mark.applied_s is None or not isinstance(promoted, str):
        return None
    for other in marks:
        if other.action != "partition" or other.facts.get("standby") != promoted:
            continue
        undo = _dict(other.facts.get("undo"))
        lifted = undo.get("lifted_s", undo.get("lifted_at_load_end_s", other.undone_s))
        began = other.applied_s
        if began is None or began > mark.applied_s:
            continue
        if isinstance(lifted, int | float) and lifted < mark.applied_s:
            continue
        return (
            f"{promoted} was cut off by the partition at {plain_number(other.at_s)} s: "
            "the commits since never reached it"
        )
    return None


def event_line(fig: EventFigures) -> str:
    """'restart at 20 s: 0.16 s without service, back to 90% in 1.1 s, 0 commits lost'."""
    mark = fig.mark
    label = _label(mark)
    if mark.skipped:
        why = (mark.problem or "not applied").removeprefix("not applied: ")
        return f"{label}: not applied ({why})"
    if mark.error:
        return f"{label}: failed: {mark.error}"
    parts = []
    windowed = mark.undone_s is not None
    if windowed and fig.tps_before is not None and fig.tps_during is not None:
        parts.append(f"TPS {_tps(fig.tps_before)} → {_tps(fig.tps_during)} during")
    if fig.gap is not None and not fig.gap.closed:
        parts.append(f"no service until the step's end ({_s(fig.gap.length)} s)")
    elif fig.downtime_s is not None and (fig.downtime_s > 0 or not windowed):
        parts.append(
            f"{_s(fig.downtime_s)} s without service" if fig.downtime_s > 0 else "no outage"
        )
    if fig.recovery_s is not None:
        recovery = _s(fig.recovery_s)
        parts.append(
            f"back to 90% {recovery} s after" if windowed else f"back to 90% in {recovery} s"
        )
    elif fig.recovery_note and fig.recovery_note != "no service until the step's end":
        note = fig.recovery_note
        parts.append(note if note.startswith("not back") else f"no recovery figure: {note}")
    if fig.lost is not None:
        lost = fig.lost
        if lost.lost == lost.lost_max:
            gone = " (acknowledged, then gone)" if lost.lost else ""
            parts.append(f"{lost.lost:,} commit{'s' if lost.lost != 1 else ''} lost{gone}")
        elif lost.lost == 0:
            parts.append(f"0 commits lost ({lost.in_doubt:,} in doubt)")
        else:
            parts.append(
                f"{lost.lost:,} to {lost.lost_max:,} commits lost ({lost.in_doubt:,} in doubt)"
            )
    elif fig.lost_note and not fig.lost_note.startswith("counted with"):
        parts.append(f"commits not counted: {fig.lost_note}")
    promoted = promotion_note(mark, fig.lost)
    if promoted:
        parts.append(promoted)
    parts += partition_notes(mark)
    if fig.cause:
        parts.append(fig.cause)
    line = f"{label}: " + ", ".join(parts)
    if mark.verified is False:
        line += f"; not verified: {mark.problem or 'no evidence'}"
    return line


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


# --- a stored step -----------------------------------------------------------------------------


def step_figures(
    sections: Mapping[str, JSONValue], histograms: Mapping[str, Mapping[int, int]]
) -> list[EventFigures]:
    """The figures of a stored step's events, from its `events` and `load` sections; [] for
    a step without events."""
    section = sections.get("events")
    marks = marks_from_section(section)
    load = sections.get("load")
    if not marks or not isinstance(load, Mapping):
        return []
    p99s = section.get("window_p99_ms") if isinstance(section, Mapping) else None
    return figures(
        marks,
        LoadRecord.from_document(load),
        histograms,
        p99s if isinstance(p99s, Mapping) else None,
    )


def step_events(
    sections: Mapping[str, JSONValue], histograms: Mapping[str, Mapping[int, int]]
) -> list[JSONValue]:
    """A step's `events` list as the JSON document shows it (docs/json.md); [] without."""
    return [fig.document() for fig in step_figures(sections, histograms)]
