"""pgbench per-transaction logs: exact histograms, percentiles and per-second series."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from howfast.workloads.pgbench import txlog
from howfast.workloads.pgbench.txlog import (
    latency_metrics,
    percentile,
    read_aggregated_logs,
    read_logs,
)

DATA = Path(__file__).parent.parent / "data" / "pgbench"


def data(*names: str) -> list[Path]:
    return [DATA / name for name in names]


def reference(paths: list[Path]) -> tuple[Counter[int], Counter[str], int]:
    """A plain line-by-line reading: latency counts, word counts, sum of a 7th column."""
    latencies: Counter[int] = Counter()
    words: Counter[str] = Counter()
    seventh = 0
    for path in paths:
        for line in path.read_text().splitlines():
            fields = line.split()
            if fields[2].isdigit():
                latencies[int(fields[2])] += 1
            else:
                words[fields[2]] += 1
            if len(fields) > 6:
                seventh += int(fields[6])
    return latencies, words, seventh


# --- real pgbench 15 logs, checked against pgbench's own summary of the same run ----------------


def test_small_log_of_two_threads_by_hand() -> None:
    summary = read_logs(data("txlog-small-pg15.log.8666", "txlog-small-pg15.log.8666.1"))
    # run-log-small-pg15.txt: "number of transactions actually processed: 40/40"
    assert summary.transactions == 40
    assert (summary.skipped, summary.failed, summary.retries) == (0, 0, None)
    assert sum(summary.histogram.values()) == 40
    assert (min(summary.histogram), max(summary.histogram)) == (366, 3093)
    assert summary.histogram[378] == 2 and summary.histogram[387] == 3
    # the 40 latencies sorted: 20th 409, 36th 535, 38th 700, 40th 3093 microseconds
    assert latency_metrics(summary.histogram) == {
        "latency_p50_ms": 0.409,
        "latency_p90_ms": 0.535,
        "latency_p95_ms": 0.700,
        "latency_p99_ms": 3.093,
        "latency_p999_ms": 3.093,
        "latency_max_ms": 3.093,
    }
    # every transaction completed within Unix second 1795344050; latencies sum to 22205 us
    assert summary.start_epoch == 1795344050
    assert summary.series == {"tps": [(0.0, 40.0)], "latency_ms": [(0.0, 22205 / 40 / 1000)]}


def test_log_with_lag_and_skipped() -> None:
    paths = data("txlog-lag-pg15.log.8672")
    summary = read_logs(paths)
    # run-log-lag-pg15.txt: "processed: 220", "skipped: 1"
    assert (summary.transactions, summary.skipped, summary.failed) == (220, 1, 0)
    latencies, words, _ = reference(paths)
    assert summary.histogram == dict(latencies)
    assert words == {"skipped": 1}
    assert summary.retries is None  # the 7th column is the schedule lag
    assert [t for t, _ in summary.series["tps"]] == [0.0, 1.0, 2.0]
    assert [v for _, v in summary.series["tps"]] == [103.0, 108.0, 9.0]
    assert summary.series["skipped"] == [(0.0, 0.0), (1.0, 1.0), (2.0, 0.0)]
    assert len(summary.series["lag_ms"]) == 3
    assert summary.metrics()["latency_max_ms"] == 15.407


def test_log_with_failures_and_retries() -> None:
    paths = data("txlog-fail-pg15.log.8796")  # --max-tries=2 --failures-detailed, first lines
    summary = read_logs(paths)
    assert summary.lines == 300
    assert (summary.transactions, summary.failed) == (161, 139)
    assert summary.failures == {"serialization": 139}
    # the 7th column holds tries - 1: 182 lines say 1, 118 say 0
    assert (summary.retries, summary.retried) == (182, 182)
    assert "lag_ms" not in summary.series
    assert summary.series["failed"] == [(0.0, 139.0)]
    latencies, words, seventh = reference(paths)
    assert summary.histogram == dict(latencies)
    assert (words, seventh) == ({"serialization": 139}, 182)


def test_hint_overrides_the_guess_of_the_seventh_column() -> None:
    summary = read_logs(data("txlog-fail-pg15.log.8796"), lag=True)
    assert summary.retries is None
    assert "lag_ms" in summary.series


def test_aggregated_log_pg15() -> None:
    summary = read_logs(data("txlog-agg-pg15.log.8688"))
    assert summary.aggregated and summary.histogram == {}
    assert summary.interval_s == 1
    assert summary.start_epoch == 1795344052
    assert summary.series["tps"] == [(0.0, 267.0), (1.0, 291.0), (2.0, 328.0), (3.0, 298.0)]
    assert summary.series["latency_ms"][0] == (0.0, 624459 / 267 / 1000)
    assert summary.series["lag_ms"][0] == (0.0, 126762 / 267 / 1000)
    assert summary.series["latency_max_ms"][2] == (2.0, 13.150)
    assert summary.transactions == 267 + 291 + 328 + 298
    assert summary.latency_max_us == 13640
    assert summary.metrics() == {"latency_max_ms": 13.64, "log_transactions": 1184}


# --- logs in the layout of older versions (constructed) ------------------------------------------


def test_pg12_log_with_lag_and_skipped_by_hand() -> None:
    summary = read_logs(data("txlog-lag-pg12.log.4242", "txlog-lag-pg12.log.4242.1"))
    assert summary.histogram == {1876: 1, 1999: 2, 2133: 1, 2480: 1, 6211: 1, 120543: 1}
    assert (summary.transactions, summary.skipped) == (7, 2)
    assert summary.start_epoch == 1715677000
    assert summary.series["tps"] == [(0.0, 3.0), (1.0, 3.0), (2.0, 1.0)]
    assert summary.series["latency_ms"] == [
        (0.0, (2133 + 1876 + 2480) / 3 / 1000),
        (1.0, (6211 + 1999 + 1999) / 3 / 1000),
        (2.0, 120.543),
    ]
    assert summary.series["lag_ms"] == [
        (0.0, (312 + 101 + 280) / 3 / 1000),
        (1.0, (4007 + 55 + 0) / 3 / 1000),
        (2.0, 2.222),
    ]
    assert summary.series["skipped"] == [(0.0, 1.0), (1.0, 0.0), (2.0, 1.0)]
    # sorted: 1876 1999 1999 2133 2480 6211 120543; p50 is the 4th, p90 the 7th
    assert latency_metrics(summary.histogram) == {
        "latency_p50_ms": 2.133,
        "latency_p90_ms": 120.543,
        "latency_p95_ms": 120.543,
        "latency_p99_ms": 120.543,
        "latency_p999_ms": 120.543,
        "latency_max_ms": 120.543,
    }


def test_pg13_aggregated_log_counts_skipped_in_num_transactions() -> None:
    summary = read_aggregated_logs(data("txlog-agg-pg13.log.777"))
    assert summary.interval_s == 5
    assert (summary.transactions, summary.skipped) == (500 + 498 + 495, 2 + 0 + 5)
    assert summary.series["tps"] == [(0.0, 100.0), (5.0, 99.6), (10.0, 99.0)]
    assert summary.series["latency_ms"] == [
        (0.0, 2.008),
        (5.0, 1045800 / 498 / 1000),
        (10.0, 1000000 / 495 / 1000),
    ]
    assert summary.series["lag_ms"][0] == (0.0, 30120 / 500 / 1000)
    assert summary.series["skipped"] == [(0.0, 2.0), (5.0, 0.0), (10.0, 5.0)]
    assert summary.latency_max_us == 15003
    assert read_logs(data("txlog-agg-pg13.log.777")) == summary


# --- percentiles ---------------------------------------------------------------------------------


def nearest_rank(values: list[int], p: float) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(Fraction(str(p)) * len(ordered) / 100)) - 1]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_percentiles_match_numpy_inverted_cdf(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 10_007  # p * n / 100 is never a whole number for the percentiles below
    values = np.round(rng.lognormal(7, 0.8, n)).astype(np.int64)
    hist = dict(Counter(values.tolist()))
    for p in (0, 1, 25, 50, 90, 95, 99, 99.9, 100):
        expected = int(np.percentile(values, p, method="inverted_cdf"))
        assert percentile(hist, p) == expected, p
    metrics = latency_metrics(hist)
    assert metrics["latency_p999_ms"] == np.percentile(values, 99.9, method="inverted_cdf") / 1000
    assert metrics["latency_max_ms"] == values.max() / 1000


def test_percentile_rank_is_exact_at_whole_ranks() -> None:
    values = list(range(1, 1001))  # 99.9% of 1000 is rank 999 exactly, not 1000
    hist = dict.fromkeys(values, 1)
    assert percentile(hist, 99.9) == 999 == nearest_rank(values, 99.9)
    assert percentile(hist, 50) == 500
    assert percentile(hist, 0) == 1
    assert percentile({7: 3}, 99) == 7
    with pytest.raises(ValueError):
        percentile({}, 50)
    with pytest.raises(ValueError):
        percentile(hist, 101)
    assert latency_metrics({}) == {}


# --- the vectorised reader against a plain one, on generated logs --------------------------------


def write_log(path: Path, rng: np.random.Generator, n: int, *, lag: bool, words: bool) -> None:
    latency = np.round(rng.lognormal(7.5, 1.0, n)).astype(np.int64)
    latency[::997] = 123_456_789  # over 8 digits and over the dense histogram's cap
    latency[::1009] = 5_000_000
    seconds = 1_715_677_000 + np.sort(rng.integers(0, 30, n))
    micros = rng.integers(0, 1_000_000, n)
    lines = []
    for i in range(n):
        time = str(latency[i])
        if words and i % 211 == 0:
            time = ("skipped", "failed", "serialization", "deadlock")[i % 4]
        fields = [str(i % 13), str(i // 13), time, str(i % 2), str(seconds[i]), str(micros[i])]
        if lag:
            fields.append(str(int(rng.integers(0, 5000))))
        lines.append(" ".join(fields))
    path.write_text("\n".join(lines) + "\n")


def plain_summary(path: Path) -> tuple[dict[int, int], dict[str, int], dict[int, int]]:
    hist: Counter[int] = Counter()
    words: Counter[str] = Counter()
    per_second: Counter[int] = Counter()
    for line in path.read_text().splitlines():
        fields = line.split()
        if fields[2].isdigit():
            hist[int(fields[2])] += 1
            per_second[int(fields[4])] += 1
        else:
            words[fields[2]] += 1
    return dict(hist), dict(words), dict(per_second)


@pytest.mark.parametrize(("lag", "words"), [(False, False), (True, True)])
def test_vectorised_reader_equals_plain_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lag: bool, words: bool
) -> None:
    path = tmp_path / "pgbench_log.123"
    write_log(path, np.random.default_rng(5), 30_000, lag=lag, words=words)
    monkeypatch.setattr(txlog, "_BLOCK", 64 * 1024)  # many blocks
    slow_calls = []
    plain = txlog._parse_block_slow

    def count_slow(block: bytes, layout: txlog._Layout) -> txlog._Rows:
        slow_calls.extend([block] if block else [])
        return plain(block, layout)

    monkeypatch.setattr(txlog, "_parse_block_slow", count_slow)
    summary = read_logs([path], lag=lag if lag else None)
    assert slow_calls == []  # every block took the vectorised path
    hist, word_counts, per_second = plain_summary(path)
    assert summary.histogram == hist
    assert summary.skipped == word_counts.get("skipped", 0)
    assert summary.failures == {w: n for w, n in word_counts.items() if w != "skipped"}
    assert summary.lines == 30_000 and summary.malformed_lines == 0
    start = min(per_second)
    assert summary.series["tps"] == [(float(s - start), float(n)) for s, n in per_second.items()]

    def refuse(*args: object) -> None:
        return None

    monkeypatch.setattr(txlog, "_parse_block_fast", refuse)  # the line-by-line path
    assert read_logs([path], lag=lag if lag else None) == summary


def test_broken_lines_are_counted_not_parsed(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_text(
        "0 1 1500 0 1715677000 100\n"
        "0 2 1600 0 1715677000 200\n"
        "0 3 -17 0 1715677000 300\n"  # not a log line
        "0 4 garbage 0 1715677001 1\n"
        "0 5 1700 0 1715677001 2\n"
        "0 6 18"  # cut short: pgbench was killed
    )
    summary = read_logs([path])
    assert summary.histogram == {1500: 1, 1600: 1, 1700: 1}
    assert summary.malformed_lines == 3
    assert summary.lines == 6


def test_empty_and_missing_final_newline(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("")
    assert read_logs([empty]).transactions == 0
    one = tmp_path / "one"
    one.write_text("3 7 2500 0 1715677000 999")
    summary = read_logs([empty, one])
    assert summary.histogram == {2500: 1}
    assert summary.series["tps"] == [(0.0, 1.0)]
