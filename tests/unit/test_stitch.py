"""A surviving load's segments joined into one timeline, on a real recording: howfast's
supervisor through a restart and a crash of PostgreSQL 15 (tests/data/pgbench/survive-pg15,
README "Segments of a surviving load"). The expected figures are computed here again from the
raw log lines, by a plain loop, and from what the database held after the load."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest

from howfast.analysis.loadrecord import Gap, LoadRecord
from howfast.workloads.pgbench import stitch
from howfast.workloads.pgbench.segments import parse_segment
from howfast.workloads.pgbench.survive import SegmentRun

ROOT = Path(__file__).parents[1] / "data" / "pgbench" / "survive-pg15"
LOAD = json.loads((ROOT / "load.json").read_text())
ORIGIN = LOAD["started_epoch"]
SAMPLING = LOAD["sampling"]


def recorded_runs() -> list[SegmentRun]:
    runs = []
    for s in LOAD["segments"]:
        directory = ROOT / f"seg-{s['number']}"
        runs.append(
            SegmentRun(
                number=s["number"], seconds=s["seconds"], started_epoch=s["started_epoch"],
                ended_epoch=s["ended_epoch"], returncode=s["returncode"],
                stdout=(directory / "out").read_text(), stderr=(directory / "err").read_text(),
                log_files=tuple(sorted((directory / "txlog").glob("tx*"))),
            )
        )  # fmt: skip
    return runs


def stitched() -> tuple[LoadRecord, dict[str, list[tuple[float, float]]], stitch.Timeline]:
    pairs = [(parse_segment(r), r.log_files) for r in recorded_runs()]
    return stitch.stitch(pairs, origin_epoch=ORIGIN, end_epoch=LOAD["ended_epoch"],
                         sampling=SAMPLING, end_command=10, not_counted=None)  # fmt: skip


def raw_commit_times() -> list[float]:
    """Every logged successful transaction's end, load-relative, by a plain reading."""
    times = []
    for path in ROOT.glob("seg-*/txlog/tx*"):
        for line in path.read_text().splitlines():
            _, _, latency, _, epoch, us = line.split()[:6]
            if latency.isdigit():
                times.append(int(epoch) + int(us) / 1e6 - ORIGIN)
    return sorted(times)


def test_the_acknowledged_commits_of_every_segment_are_the_rows_the_database_kept():
    record, _, _ = stitched()
    assert record.acked == LOAD["history_rows"] == 6411
    assert record.failed_connects == sum(1 for s in LOAD["segments"] if s["returncode"] == 1)
    assert record.aborted_clients == 4  # two clients cut by each event
    assert [s.ran for s in record.segments].count(True) == 5


def test_the_timeline_holds_every_logged_commit_on_the_load_clock():
    _, _, timeline = stitched()
    expected = raw_commit_times()
    assert timeline.commits_s.tolist() == pytest.approx(expected, abs=1e-6)
    assert timeline.malformed_lines == 0 and len(timeline.failed_s) == 0
    # a log sampled at 0.1 holds about a tenth of the acknowledged commits
    assert abs(len(expected) - LOAD["history_rows"] * SAMPLING) < 5 * math.sqrt(
        LOAD["history_rows"] * SAMPLING * (1 - SAMPLING)
    )


def test_each_event_lies_in_a_stretch_without_commits_from_the_last_before_to_the_first_after():
    record, _, _ = stitched()
    times = raw_commit_times()
    for event in LOAD["events"]:
        # the longest spacing of consecutive commits around the event (after a SIGKILL of the
        # postmaster its backends still commit for a moment: the last commit may follow it)
        pairs = [
            (a, b)
            for a, b in itertools.pairwise(times)
            if a <= event["back_s"] + 1 and b >= event["applied_s"]
        ]
        before, after = max(pairs, key=lambda p: p[1] - p[0])
        (gap,) = [g for g in record.gaps if g.t0 <= event["back_s"] and g.t1 >= event["applied_s"]]
        assert (gap.t0, gap.t1) == pytest.approx((before, after), abs=1e-6)
        assert gap.closed and gap.length > 0.1
    # no gap is shorter than the threshold of 5 median intervals
    assert record.interval_ms is not None
    threshold = max(stitch.GAP_FLOOR_S, 5 * record.interval_ms / 1000)
    assert all(g.length >= threshold - 1e-9 for g in record.gaps)


def test_the_per_second_series_count_from_the_load_start_and_are_zero_filled():
    record, series, _ = stitched()
    times = raw_commit_times()
    seconds = math.floor(record.end_s)
    assert [t for t, _ in series["tps"]] == [float(k) for k in range(1, seconds + 1)]
    for k, (_, tps) in enumerate(series["tps"]):
        logged = sum(1 for t in times if k <= t < k + 1)
        assert tps == pytest.approx(logged / SAMPLING)
    assert len(series["failed"]) == seconds and all(v == 0 for _, v in series["failed"])
    # the latency series has a point only for seconds with a commit
    assert len(series["latency_ms"]) == sum(1 for _, v in series["tps"] if v > 0)


def test_commit_bins_are_tenths_of_a_second_and_give_tps_over_any_window():
    record, series, _ = stitched()
    times = raw_commit_times()
    assert len(record.commit_bins) == math.ceil(record.end_s / 0.1)
    assert sum(record.commit_bins) == len(times)
    assert record.tps(2.0, 3.0) == pytest.approx(dict(series["tps"])[3.0])
    assert record.tps(2.3, 2.8) == pytest.approx(
        sum(1 for t in times if 2.3 <= t < 2.8) / SAMPLING / 0.5
    )
    assert record.tps(3.0, 3.0) is None and record.tps(0, record.end_s + 5) is None


def test_each_segment_knows_its_first_and_last_commit_and_boundaries_cost_little():
    record, _, _ = stitched()
    ran = [s for s in record.segments if s.ran]
    assert all(s.first_commit_s is not None and s.last_commit_s is not None for s in ran)
    assert all(s.first_commit_s is None for s in record.segments if not s.ran)
    gaps = stitch.boundary_gaps(record.segments)
    assert len(gaps) == len(ran) - 1
    # segment 1 ended on time: the next one's first logged commit follows within a fraction of
    # a second (boundary plus the sampled log's spacing); across the events, the outages
    first, restart, between, crash = gaps
    assert 0 < first < 0.5 and 0 < between < 0.5
    assert restart > 0.1 and crash > 0.5


def test_the_load_record_round_trips_through_its_document():
    record, _, _ = stitched()
    document = json.loads(json.dumps(record.document()))
    back = LoadRecord.from_document(document)
    assert back.document() == record.document()
    assert back.acked == record.acked and back.gaps == tuple(
        Gap(round(g.t0, 6), round(g.t1, 6), g.closed) for g in record.gaps
    )


def test_a_load_that_never_committed_has_no_gaps_and_zero_seconds():
    empty = stitch.read_timeline([], ORIGIN)
    assert stitch.commit_gaps(empty.commits_s, 10.0) == ((), None)
    series = stitch.per_second(empty, 3.0, None)
    assert series["tps"] == [(1.0, 0.0), (2.0, 0.0), (3.0, 0.0)] and series["latency_ms"] == []


def test_an_outage_until_the_end_is_an_open_gap(tmp_path: Path):
    log = tmp_path / "tx.1"
    log.write_text("".join(f"0 {i} 1000 0 1000 {i * 10_000}\n" for i in range(50)))
    timeline = stitch.read_timeline([log], 1000.0)
    gaps, interval_ms = stitch.commit_gaps(timeline.commits_s, 3.0)
    assert interval_ms == pytest.approx(10.0)
    assert gaps == (Gap(0.49, 3.0, closed=False),)
