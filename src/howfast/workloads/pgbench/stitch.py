"""A surviving load's segments joined into one timeline (survive.py): the per-second series
counted from the load's start and zero-filled through an outage, the stretches without
commits, and the load record a step stores. Pure: it reads the segments' logs and outputs.

A log line is `client tx latency script epoch_s us ...` (txlog.py): the time is when the
transaction ended on the client, so the commit's acknowledgement; a word instead of the
latency is a failed (or skipped) transaction.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from howfast.analysis.loadrecord import BIN_S, Gap, LoadRecord, SegmentFacts
from howfast.workloads.pgbench.segments import Segment
from howfast.workloads.pgbench.txlog import FAILURE_WORDS, SKIPPED

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Point = tuple[float, float]

GAP_FLOOR_S = 0.020  # below this a pause is scheduling noise, not an outage
GAP_FACTOR = 5.0  # ... and below this many median intervals between logged commits


@dataclass(frozen=True)
class Timeline:
    """Every logged transaction of a load, in seconds since its start."""

    commits_s: FloatArray  # end times of successful transactions, sorted
    latency_us: IntArray  # their latencies, in the same order
    failed_s: FloatArray  # end times of failed ones, sorted
    malformed_lines: int = 0

    def histogram(self, lo_s: float, hi_s: float) -> dict[int, int]:
        """Latencies (µs -> count) of the transactions that ended in [lo_s, hi_s)."""
        a, b = np.searchsorted(self.commits_s, [lo_s, hi_s], side="left")
        values, counts = np.unique(self.latency_us[a:b], return_counts=True)
        return dict(zip(values.tolist(), counts.tolist(), strict=True))


def read_timeline(paths: Iterable[str | os.PathLike[str]], origin_epoch: float) -> Timeline:
    """The logs of a load (any number of segments and threads) on one clock from `origin_epoch`."""
    ends: list[int] = []
    latencies: list[int] = []
    failed: list[int] = []
    malformed = 0
    for path in paths:
        with Path(path).open("rb") as f:
            for raw in f:
                parts = raw.split()
                if not parts:
                    continue
                if len(parts) < 6 or not (parts[4].isdigit() and parts[5].isdigit()):
                    malformed += 1
                    continue
                end_us = int(parts[4]) * 1_000_000 + int(parts[5])
                latency = parts[2]
                if latency.isdigit():
                    ends.append(end_us)
                    latencies.append(int(latency))
                elif latency.decode("ascii", "replace") in FAILURE_WORDS:
                    failed.append(end_us)
                elif latency != SKIPPED.encode():
                    malformed += 1
    origin_us = origin_epoch * 1_000_000
    end_array = np.array(ends, dtype=np.int64)
    order = np.argsort(end_array, kind="stable")
    return Timeline(
        commits_s=(end_array[order] - origin_us) / 1_000_000,
        latency_us=np.array(latencies, dtype=np.int64)[order],
        failed_s=np.sort((np.array(failed, dtype=np.int64) - origin_us) / 1_000_000),
        malformed_lines=malformed,
    )


def per_second(timeline: Timeline, end_s: float, sampling: float | None) -> dict[str, list[Point]]:
    """`tps`, `latency_ms` and `failed` for each whole second of the load, [k, k+1) stamped
    k + 1 (as pgbench -P stamps its intervals). Seconds without a commit count 0 TPS (an
    outage is there, not missing) and have no latency point. Counts from a sampled log are
    scaled up by its sampling rate."""
    seconds = max(0, math.floor(end_s + 1e-9))
    scale = 1 / sampling if sampling else 1.0
    bins = np.arange(seconds + 1, dtype=np.float64)
    commits, _ = np.histogram(timeline.commits_s, bins=bins)
    latency_sum, _ = np.histogram(timeline.commits_s, bins=bins, weights=timeline.latency_us)
    failures, _ = np.histogram(timeline.failed_s, bins=bins)
    stamps = [float(k + 1) for k in range(seconds)]
    return {
        "tps": [(t, float(n) * scale) for t, n in zip(stamps, commits.tolist(), strict=True)],
        "latency_ms": [
            (t, s / n / 1000)
            for t, n, s in zip(stamps, commits.tolist(), latency_sum.tolist(), strict=True)
            if n
        ],
        "failed": [(t, float(n) * scale) for t, n in zip(stamps, failures.tolist(), strict=True)],
    }


def commit_bins(timeline: Timeline, end_s: float) -> tuple[int, ...]:
    """Logged commits per BIN_S of the load, from its start to its end."""
    count = max(0, math.ceil(end_s / BIN_S - 1e-9))
    edges = np.arange(count + 1, dtype=np.float64) * BIN_S
    bins, _ = np.histogram(timeline.commits_s, bins=edges)
    return tuple(int(n) for n in bins.tolist())


def median_interval_s(commits_s: FloatArray) -> float | None:
    """The median spacing of logged commits: the resolution of every gap measured from them."""
    if len(commits_s) < 2:
        return None
    return float(np.median(np.diff(commits_s)))


def commit_gaps(commits_s: FloatArray, end_s: float) -> tuple[tuple[Gap, ...], float | None]:
    """The stretches without a logged commit of at least max(GAP_FLOOR_S, GAP_FACTOR x the
    median interval), and that median. A stretch from the last commit to the load's end is an
    open gap. Gaps are looked for from the first commit: the load's start is a connection's,
    not an outage."""
    interval = median_interval_s(commits_s)
    if interval is None:
        return (), None
    threshold = max(GAP_FLOOR_S, GAP_FACTOR * interval)
    spacing = np.diff(commits_s)
    where = np.flatnonzero(spacing >= threshold)
    gaps = [Gap(float(commits_s[i]), float(commits_s[i + 1])) for i in where.tolist()]
    last = float(commits_s[-1])
    if end_s - last >= threshold:
        gaps.append(Gap(last, end_s, closed=False))
    return tuple(gaps), interval * 1000


def boundary_gaps(segments: Sequence[SegmentFacts]) -> list[float]:
    """Seconds from the last commit of each segment that ran to the first commit of the next
    one that ran: the time a boundary costs, plus one commit interval."""
    spans = [
        (s.first_commit_s, s.last_commit_s)
        for s in segments
        if s.first_commit_s is not None and s.last_commit_s is not None
    ]
    return [b[0] - a[1] for a, b in itertools.pairwise(spans)]


def merged(timelines: Sequence[Timeline]) -> Timeline:
    """One timeline of several (the segments of a load)."""
    commits = np.concatenate([t.commits_s for t in timelines]) if timelines else np.zeros(0)
    latency = np.concatenate([t.latency_us for t in timelines]) if timelines else np.zeros(0)
    failed = np.concatenate([t.failed_s for t in timelines]) if timelines else np.zeros(0)
    order = np.argsort(commits, kind="stable")
    return Timeline(
        commits_s=commits[order].astype(np.float64),
        latency_us=latency[order].astype(np.int64),
        failed_s=np.sort(failed).astype(np.float64),
        malformed_lines=sum(t.malformed_lines for t in timelines),
    )


def segment_facts(segment: Segment, origin_epoch: float, own: Timeline) -> SegmentFacts:
    """A segment as the load record keeps it, with the first and last commit of its log."""
    first = float(own.commits_s[0]) if len(own.commits_s) else None
    last = float(own.commits_s[-1]) if len(own.commits_s) else None
    return SegmentFacts(
        number=segment.number,
        seconds=segment.seconds,
        started_s=segment.started_epoch - origin_epoch,
        ended_s=None if segment.ended_epoch is None else segment.ended_epoch - origin_epoch,
        returncode=segment.returncode,
        acked=segment.acked,
        failed=segment.failed,
        aborts=tuple((a.client, a.command) for a in segment.aborts),
        first_commit_s=first,
        last_commit_s=last,
        connect_error=segment.connect_error,
    )


def stitch(
    segments: Sequence[tuple[Segment, Sequence[str | os.PathLike[str]]]],
    *,
    origin_epoch: float,
    end_epoch: float,
    sampling: float | None,
    end_command: int | None,
    not_counted: str | None,
) -> tuple[LoadRecord, dict[str, list[Point]], Timeline]:
    """The load record, the per-second series, and the whole timeline (for the windows'
    latency histograms) of a load, from each segment and its log files."""
    end_s = end_epoch - origin_epoch
    own = [read_timeline(files, origin_epoch) for _, files in segments]
    facts = tuple(
        segment_facts(s, origin_epoch, t) for (s, _), t in zip(segments, own, strict=True)
    )
    timeline = merged(own)
    gaps, interval_ms = commit_gaps(timeline.commits_s, end_s)
    record = LoadRecord(
        origin_epoch=origin_epoch,
        end_s=end_s,
        segments=facts,
        gaps=gaps,
        interval_ms=interval_ms,
        sampling=sampling,
        end_command=end_command,
        not_counted=not_counted,
        commit_bins=commit_bins(timeline, end_s),
    )
    return record, per_second(timeline, end_s, sampling), timeline
