"""Each event's figures (analysis/events.py): first on the real recording of a restart and a
crash (tests/data/pgbench/survive-pg15, with the rows PostgreSQL held afterwards), then each
rule on loads built here second by second: the outage, the baseline and its shorter forms,
recovery (the next second too), never recovered, for= windows, lost commits and their
in-doubt bound (the design's F11 numbers), shared windows, and the verdict line."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from howfast.analysis import events
from howfast.analysis.loadrecord import Gap, HistoryCount, LoadRecord, SegmentFacts
from howfast.event_marks import EventMark, marks_from_section
from tests.unit.test_stitch import LOAD, ORIGIN, stitched

# --- the recording ---------------------------------------------------------------------------


def recorded_marks() -> list[EventMark]:
    return [
        EventMark(i + 1, f"{e['at_s']:g}s:{e['action']}", e["action"], e["at_s"],
                  applied_s=e["applied_s"], back_s=e["back_s"], verified=True)
        for i, e in enumerate(LOAD["events"])
    ]  # fmt: skip


def rows_between(lo: float | None, hi: float | None) -> int:
    """pgbench_history rows with mtime in [lo, hi) of the load, from the recorded counts by the
    hundredth of a second."""
    by_10ms = {int(k): v for k, v in LOAD["history_rows_by_10ms"].items()}
    return sum(
        n
        for c, n in by_10ms.items()
        if (lo is None or c / 100 >= ORIGIN + lo) and (hi is None or c / 100 < ORIGIN + hi)
    )


def test_the_recorded_restart_and_crash_lost_no_commit_window_by_window():
    record, _, timeline = stitched()
    marks = recorded_marks()
    windows = events.commit_windows(marks, record)
    assert len(windows) == 3  # cut within each outage, between two segments
    restart_gap, crash_gap = (events.event_gap(m, record.gaps) for m in marks)
    assert restart_gap is not None and crash_gap is not None
    for (_, cut), gap in zip(windows, (restart_gap, crash_gap), strict=False):
        assert cut is not None and gap.t0 < cut < gap.t1
        assert not [s for s in record.segments if s.ran and s.started_s < cut < (s.ended_s or 0)]
    counts = tuple(HistoryCount(lo, hi, rows_between(lo, hi)) for lo, hi in windows)
    assert sum(c.rows for c in counts) == LOAD["history_rows"]
    record = dataclasses.replace(record, history=counts)
    named = events.windows(marks, record)
    histograms = {f"latency_us:{k}": timeline.histogram(*w) for k, w in named.items()}
    restart, crash = events.figures(marks, record, histograms)

    assert restart.downtime_s == pytest.approx(restart_gap.length)
    assert 0.1 < restart.downtime_s < 2  # type: ignore[operator]
    assert restart.lost is not None and restart.lost.acked == counts[0].rows
    assert (restart.lost.lost, restart.lost.lost_max, restart.lost.in_doubt) == (0, 0, 0)
    assert restart.failed_transactions == 2  # both clients cut
    assert restart.failed_connects == 3  # shutting down, no socket, refused
    assert restart.baseline_s == 3 and restart.tps_before is not None
    assert restart.recovery_s is not None and restart.p99_before_ms is not None
    assert re.fullmatch(
        r"restart at 4\.5 s: 0\.\d\d s without service, back to 90% in \d\.\d s, "
        r"0 commits lost",
        events.event_line(restart),
    )

    assert crash.downtime_s == pytest.approx(crash_gap.length) and crash.downtime_s > 0.5  # type: ignore[operator]
    assert crash.lost is not None and crash.lost.acked == counts[1].rows
    assert crash.lost.lost == 0 and crash.failed_connects == 9
    # the restart recovered at 8.5 s: too few seconds before the crash at 9.5 s for a baseline
    assert crash.recovery_s is None and crash.baseline_s == 0
    assert crash.recovery_note == "not enough seconds before the event (0 s; 3 needed)"
    assert events.event_line(crash) == (
        f"crash at 9.5 s: {crash.downtime_s:.1f} s without service, no recovery figure: not "
        "enough seconds before the event (0 s; 3 needed), 0 commits lost"
    )


RESTART_FAILOVER = json.loads(
    (Path(__file__).parent.parent / "data" / "events" / "restart-failover-pg15.json").read_text()
)


def test_a_restart_then_a_failover_with_a_sync_standby_lose_nothing_window_by_window():
    """The recording (tests/data/events/record-restart-failover-pg15.py): after the restart
    the clients' first transactions began as the server came back (3.4 s) and waited in their
    COMMIT for the standby to reconnect (8.3 s): their rows carry 3.4 s. Cut at the middle of
    the outage (5.7 s), those rows fell in the window before while their commits were
    acknowledged in the one after: 1 commit "lost" (2 with the one in doubt) at the failover,
    2 rows too many before. Cut between segments, every window is exact, as the whole step
    is: 2241 acknowledged, 2242 rows, 1 in doubt that survived."""
    doc = RESTART_FAILOVER
    load = LoadRecord.from_document(doc["load"])
    marks = marks_from_section(doc["marks"])
    origin = load.origin_epoch
    by_10ms = {int(k): v for k, v in doc["history_rows_by_10ms"].items()}

    def rows(lo: float | None, hi: float | None) -> int:
        return sum(
            n
            for c, n in by_10ms.items()
            if (lo is None or c / 100 >= origin + lo) and (hi is None or c / 100 < origin + hi)
        )

    in_doubt = sum(s.in_doubt(load.end_command) for s in load.segments)
    assert (load.acked, doc["history_rows"], in_doubt) == (2241, 2242, 1)
    windows = events.commit_windows(marks, load)
    assert len(windows) == 3
    for window in windows:
        lost = events.lost_in_window(load, window, rows(*window))
        assert (lost.lost, lost.lost_max) == (0, 0), (window, lost)
    record = dataclasses.replace(
        load, history=tuple(HistoryCount(lo, hi, rows(lo, hi)) for lo, hi in windows)
    )
    restart, failover = events.figures(marks, record, {})
    for fig in (restart, failover):
        assert fig.lost is not None and fig.lost.lost == 0, events.event_line(fig)
    assert failover.lost is not None and failover.lost.in_doubt == 1
    assert events.event_line(failover).endswith("0 commits lost")


def test_a_commit_missing_from_the_database_is_counted_lost():
    record, _, _ = stitched()
    marks = recorded_marks()
    windows = events.commit_windows(marks, record)
    counts = [HistoryCount(lo, hi, rows_between(lo, hi)) for lo, hi in windows]
    counts[1] = HistoryCount(counts[1].lo_s, counts[1].hi_s, counts[1].rows - 3)
    _, crash = events.figures(marks, dataclasses.replace(record, history=tuple(counts)))
    assert crash.lost is not None and crash.lost.lost == 3
    assert events.event_line(crash).endswith("3 commits lost (acknowledged, then gone)")


# --- loads built second by second -------------------------------------------------------------


def built(
    rate: Callable[[float], float],
    end_s: float,
    *,
    gaps: Sequence[Gap] = (),
    segments: Sequence[SegmentFacts] = (),
    history: Sequence[HistoryCount] = (),
    not_counted: str | None = None,
) -> LoadRecord:
    """A load committing `rate(t)` per second, in 0.1 s bins."""
    bins = tuple(round(rate(j * 0.1 + 0.05) * 0.1) for j in range(math.ceil(end_s / 0.1)))
    return LoadRecord(
        origin_epoch=1_000.0, end_s=end_s, segments=tuple(segments), gaps=tuple(gaps),
        interval_ms=1.0, sampling=None, end_command=10, not_counted=not_counted,
        history=tuple(history), commit_bins=bins,
    )  # fmt: skip


def mark(index: int, text: str, applied: float, **kw: object) -> EventMark:
    at, _, action = text.partition(":")
    name = re.match(r"[a-z-]+", action)
    assert name is not None
    return EventMark(index, text, name.group(0), float(at.rstrip("s")), applied_s=applied,
                     verified=True, **kw)  # type: ignore[arg-type]  # fmt: skip


def steps(*pieces: tuple[float, float]) -> Callable[[float], float]:
    """rate(t) from (from_s, tps) pieces, each lasting until the next."""

    def rate(t: float) -> float:
        return next(tps for start, tps in reversed(pieces) if t >= start)

    return rate


def test_recovery_ends_at_the_first_second_at_90_percent_whose_next_second_is_too():
    # 1000 TPS, out 10.0-10.5, back at full speed for a second, a dip to 400 from 11.5 to
    # 11.8, then full speed: the second from 10.5 alone would say 1.5 s
    rate = steps((0, 1000), (10.0, 0), (10.5, 1000), (11.5, 400), (11.8, 1000))
    load = built(rate, 30.0, gaps=[Gap(10.0, 10.5)])
    (fig,) = events.figures([mark(1, "10s:restart", 10.0, back_s=10.4)], load)
    assert fig.downtime_s == pytest.approx(0.5)
    assert fig.baseline_s == 9 and fig.tps_before == pytest.approx(1000)
    assert fig.recovery_s == pytest.approx(2.7)
    assert fig.tps_after == pytest.approx(1000)  # [12.7, 30)
    assert events.event_line(fig) == (
        "restart at 10 s: 0.50 s without service, back to 90% in 2.7 s, commits not counted: "
        "pgbench_history was not counted after the load"
    )


def test_the_baseline_is_the_30_seconds_before_or_what_the_step_has():
    rate = steps((0, 1000), (45.0, 0), (45.2, 1000))
    long = built(rate, 60.0, gaps=[Gap(45.0, 45.2)])
    (fig,) = events.figures([mark(1, "45s:crash", 45.0)], long)
    assert fig.baseline_s == 30  # [15, 45)
    short = built(steps((0, 1000), (5.0, 0), (5.2, 1000)), 20.0, gaps=[Gap(5.0, 5.2)])
    (fig,) = events.figures([mark(1, "5s:crash", 5.0)], short)
    assert fig.baseline_s == 4 and fig.recovery_s == pytest.approx(1.2)  # [1, 5): used, said
    too_short = built(steps((0, 1000), (3.5, 0), (3.7, 1000)), 20.0, gaps=[Gap(3.5, 3.7)])
    (fig,) = events.figures([mark(1, "3.5s:crash", 3.5)], too_short)
    assert fig.baseline_s == 2 and fig.recovery_s is None
    assert fig.recovery_note == "not enough seconds before the event (2 s; 3 needed)"


def test_a_load_that_stays_slow_is_not_back_within_the_step():
    load = built(steps((0, 1000), (10.0, 0), (10.3, 500)), 20.0, gaps=[Gap(10.0, 10.3)])
    (fig,) = events.figures([mark(1, "10s:failover", 10.0)], load)
    assert fig.recovery_s is None
    assert fig.recovery_note == "not back to 90% within the step (10 s after)"
    assert fig.tps_after == pytest.approx(500)  # from the outage's end: the slower level
    assert "not back to 90% within the step (10 s after)" in events.event_line(fig)


def test_an_outage_until_the_end_is_said_so():
    load = built(steps((0, 1000), (10.0, 0)), 20.0, gaps=[Gap(10.0, 20.0, closed=False)])
    (fig,) = events.figures([mark(1, "10s:crash", 10.0)], load)
    assert fig.downtime_s == pytest.approx(10.0) and fig.recovery_s is None
    assert fig.document()["downtime_until_end"] is True
    assert events.event_line(fig).startswith(
        "crash at 10 s: no service until the step's end (10 s), commits not counted"
    )
    assert events.commit_windows([mark(1, "10s:crash", 10.0)], load) == [(None, None)]


def test_an_event_without_an_outage_has_none():
    load = built(steps((0, 1000)), 20.0, gaps=[Gap(3.0, 3.03)])  # a segment boundary, earlier
    (fig,) = events.figures([mark(1, "10s:checkpoint", 10.0)], load)
    assert fig.downtime_s == 0.0 and fig.gap is None and fig.recovery_s == pytest.approx(1.0)
    assert events.event_line(fig).startswith("checkpoint at 10 s: no outage, back to 90% in 1.0 s")


def test_a_for_window_has_its_tps_during_and_recovers_from_its_end():
    rate = steps((0, 1000), (5.0, 400), (9.0, 1000))
    load = built(rate, 20.0)
    slow = mark(1, "5s:slow-storage=5ms,for=4s", 5.0, undone_s=9.0)
    (fig,) = events.figures([slow], load)
    assert fig.tps_during == pytest.approx(400) and fig.tps_before == pytest.approx(1000)
    assert fig.recovery_s == pytest.approx(1.0)  # from 9.0, the slowness undone
    assert events.windows([slow], load)["event1:during"] == (6.0, 9.0)
    assert events.event_line(fig).startswith(
        "slow-storage +5ms for 4 s at 5 s: TPS 1,000 → 400 during, back to 90% 1.0 s after"
    )


def segment(n: int, start: float, end: float, acked: int | None, aborts=(), **kw) -> SegmentFacts:  # type: ignore[no-untyped-def]
    return SegmentFacts(n, 10, start, end, 2 if aborts else (0 if acked is not None else 1),
                        acked, aborts=tuple(aborts), first_commit_s=start + 0.01 if acked else None,
                        last_commit_s=end - 0.01 if acked else None, **kw)  # fmt: skip


def failover_load(acked_before: int, rows_before: int, in_doubt: int) -> LoadRecord:
    """A failover at 10 s: out from 10.0 to 11.0, clients cut, `in_doubt` of them in END."""
    aborts = [(c, 10) for c in range(in_doubt)] + [(3, 5)]
    segments = [segment(1, 0.0, 10.0, acked_before, aborts), segment(2, 10.0, 10.05, None),
                segment(3, 11.0, 20.0, 9000)]  # fmt: skip
    history = [HistoryCount(None, 10.5, rows_before), HistoryCount(10.5, None, 9000)]
    return built(steps((0, 1000), (10.0, 0), (11.0, 1000)), 20.0, gaps=[Gap(10.0, 11.0)],
                 segments=segments, history=history)  # fmt: skip


@pytest.mark.parametrize(
    ("acked", "rows", "in_doubt", "lost", "lost_max", "says"),
    [
        # the design's F11: sync on, both in-doubt commits survived
        (1056, 1058, 2, 0, 0, "0 commits lost"),
        # sync off, nothing visibly lost, 2 in doubt
        (2073, 2073, 2, 0, 2, "0 commits lost (2 in doubt)"),
        # sync off with the standby stalled: 193 acknowledged commits gone
        (2266, 2073, 0, 193, 193, "193 commits lost (acknowledged, then gone)"),
        (2078, 2073, 2, 5, 7, "5 to 7 commits lost (2 in doubt)"),
        (1, 0, 0, 1, 1, "1 commit lost (acknowledged, then gone)"),
        # thousands grouped, as the bytes beside them are
        (12073, 3759, 1, 8314, 8315, "8,314 to 8,315 commits lost (1 in doubt)"),
    ],
)
def test_lost_commits_are_proven_and_bounded_by_those_in_doubt(
    acked, rows, in_doubt, lost, lost_max, says
):
    load = failover_load(acked, rows, in_doubt)
    failover = mark(1, "10s:failover", 10.0, back_s=10.9)
    assert events.commit_windows([failover], load) == [(None, 10.5), (10.5, None)]
    (fig,) = events.figures([failover], load)
    assert fig.lost is not None
    assert (fig.lost.acked, fig.lost.rows, fig.lost.in_doubt) == (acked, rows, in_doubt)
    assert (fig.lost.lost, fig.lost.lost_max) == (lost, lost_max)
    assert events.event_line(fig).endswith(says)
    assert fig.failed_transactions == in_doubt + 1 and fig.failed_connects == 1
    doc = fig.document()
    assert (doc["lost_commits"], doc["lost_commits_max"], doc["in_doubt"]) == (
        lost, lost_max, in_doubt,
    )  # fmt: skip
    assert doc["lost_commits_method"] == "pgbench_history rows vs acknowledged commits"


def test_events_in_one_window_are_counted_together_on_the_event_that_cuts_it():
    rate = steps((0, 1000), (7.0, 0), (8.0, 1000))
    segments = [segment(1, 0.0, 7.0, 6900, [(0, 4)]), segment(2, 8.0, 20.0, 12000)]
    history = [HistoryCount(None, 7.5, 6900), HistoryCount(7.5, None, 12000)]
    load = built(rate, 20.0, gaps=[Gap(7.0, 8.0)], segments=segments, history=history)
    marks = [mark(1, "3s:checkpoint", 3.0), mark(2, "7s:crash", 7.0, back_s=7.9),
             mark(3, "12s:checkpoint", 12.0)]  # fmt: skip
    first, crash, last = events.figures(marks, load)
    assert crash.lost is not None and crash.lost.window == (None, 7.5) and crash.lost.lost == 0
    assert first.lost is None and first.lost_note == "counted with 7s:crash: one window"
    assert last.lost is not None and last.lost.window == (7.5, None)  # the rest of the load
    assert "commits" not in events.event_line(first)  # said on the crash's line
    assert crash.failed_transactions == 1 and first.failed_transactions == 0


def test_no_cut_where_a_segment_committed_on_both_sides_of_the_outage():
    # the connections survived the pause (a segment's commits before and after it): the
    # rows cannot be split there, so the load is one window
    spanning = SegmentFacts(1, 20, 0.0, 20.0, 0, 19000, first_commit_s=0.01, last_commit_s=19.9)
    load = built(steps((0, 1000), (10.0, 0), (11.0, 1000)), 20.0, gaps=[Gap(10.0, 11.0)],
                 segments=[spanning], history=[HistoryCount(None, None, 19000)])  # fmt: skip
    marks = [mark(1, "10s:restart", 10.0)]
    assert events.commit_windows(marks, load) == [(None, None)]
    (fig,) = events.figures(marks, load)
    assert fig.lost is not None and fig.lost.lost == 0 and fig.lost.window == (None, None)


def test_scripts_that_record_no_commit_say_why_they_are_not_counted():
    load = built(steps((0, 1000)), 20.0, not_counted="select-only commits nothing")
    (fig,) = events.figures([mark(1, "10s:checkpoint", 10.0)], load)
    assert fig.lost is None and fig.document()["lost_commits"] is None
    assert fig.document()["lost_commits_method"] == "select-only commits nothing"
    assert events.event_line(fig).endswith("commits not counted: select-only commits nothing")


def test_window_latencies_come_from_their_histograms():
    load = built(steps((0, 1000), (10.0, 0), (10.3, 1000)), 30.0, gaps=[Gap(10.0, 10.3)])
    marks = [mark(1, "10s:restart", 10.0)]
    named = events.windows(marks, load)
    assert named["event1:before"] == (1.0, 10.0)
    after = named["event1:after"]
    assert after[0] == pytest.approx(11.3) and after[1] == pytest.approx(30.0)
    histograms = {"latency_us:event1:before": {1000: 98, 5000: 2},
                  "latency_us:event1:after": {1000: 50, 9000: 50}}  # fmt: skip
    (fig,) = events.figures(marks, load, histograms)
    assert fig.p99_before_ms == 5.0 and fig.p99_after_ms == 9.0 and fig.p99_during_ms is None


def test_marks_that_failed_or_were_skipped_say_so():
    load = built(steps((0, 1000)), 20.0)
    failed = mark(1, "5s:crash", 5.0, error="the server did not start again")
    skipped = EventMark(2, "8s:restart", "restart", 8.0, skipped=True,
                        problem="not applied: an earlier event failed")  # fmt: skip
    unverified = mark(3, "12s:checkpoint", 12.0)
    unverified = dataclasses.replace(
        unverified, verified=False, problem="checkpoints_req did not grow"
    )
    one, two, three = events.figures([failed, skipped, unverified], load)
    assert events.event_line(one) == "crash at 5 s: failed: the server did not start again"
    assert events.event_line(two) == "restart at 8 s: not applied (an earlier event failed)"
    assert two.downtime_s is None and two.lost_note == "not applied"
    late = EventMark(4, "19s:restart", "restart", 19.0, skipped=True,
                     problem="not applied: the load ended before its time")  # fmt: skip
    (fig,) = events.figures([late], load)
    assert events.event_line(fig) == (
        "restart at 19 s: not applied (the load ended before its time)"
    )
    assert events.event_line(three).endswith("; not verified: checkpoints_req did not grow")


def test_the_document_has_every_figure_the_json_contract_lists():
    load = built(steps((0, 1000)), 20.0)
    (fig,) = events.figures([mark(1, "10s:checkpoint", 10.0)], load)
    assert set(fig.document()) >= {
        "index", "text", "action", "at_s", "applied_s", "back_s", "verified", "evidence",
        "problem", "downtime_s", "downtime_resolution_ms", "recovery_s", "baseline_s",
        "tps_before", "tps_after", "tps_during", "p99_before_ms", "p99_after_ms",
        "p99_during_ms", "failed_transactions", "failed_connects", "lost_commits",
        "lost_commits_max", "in_doubt", "lost_commits_method", "line",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("seen", "rows", "note"),
    [
        ({"state": "streaming", "sync_state": "sync", "unflushed_bytes": 8192}, 1000, None),
        ({"state": "streaming", "sync_state": "async", "unflushed_bytes": 0}, 990, None),
        (
            {"state": "streaming", "sync_state": "async", "unflushed_bytes": 122880},
            990,
            "standby_1 was async when promoted, 122,880 bytes of WAL behind",
        ),
        # behind, but every acknowledged commit is there: nothing to explain
        ({"state": "streaming", "sync_state": "async", "unflushed_bytes": 122880}, 1000, None),
        ({"state": "not connected"}, 1000, "standby_1 was not connected when promoted"),
        ({"state": "catchup"}, 1000, "standby_1 was catchup when promoted"),
        ({"state": "unknown", "problem": "timeout"}, 990, None),
    ],
)
def test_a_failover_line_says_when_the_promoted_standby_could_lack_commits(
    seen: dict[str, object], rows: int, note: str | None
):
    failover = mark(1, "10s:failover", 10.0, back_s=10.9,
                    facts={"promoted": "standby_1", "standby_before": seen})  # fmt: skip
    (fig,) = events.figures([failover], failover_load(1000, rows, 0))
    assert events.promotion_note(failover, fig.lost) == note
    line = events.event_line(fig)
    assert line.endswith(f", {note}") if note else "when promoted" not in line, line
