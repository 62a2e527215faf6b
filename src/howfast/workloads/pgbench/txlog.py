"""pgbench's per-transaction logs (-l): exact latency histograms and per-second series.

A log line is `client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]`
(pgbench 10 to 17). `time` is the latency in microseconds, or a word for a transaction that has
none: `skipped` (--rate with --latency-limit), `failed` (15+), or with --failures-detailed (15+)
`serialization` / `deadlock` (`other` in later versions). `schedule_lag` is there under --rate,
`retries` (tries - 1) when --max-tries is not 1 (15+). With -j N, pgbench writes one file per
thread: `prefix.PID`, `prefix.PID.1`, ...

With --aggregate-interval the lines are per interval instead:
- 10-14: `interval_start num_transactions sum_latency sum_latency_2 min_latency max_latency
  [sum_lag sum_lag_2 min_lag max_lag [skipped]]`, num_transactions counting skipped ones;
- 15-17: always `... max_latency sum_lag sum_lag_2 min_lag max_lag skipped retried retries
  serialization_failures deadlock_failures` (zeros when the option is off), num_transactions
  counting successful ones only.
Aggregated logs cannot give exact percentiles: they give per-interval series only, an empty
histogram, and `aggregated=True`.

Percentiles are exact, from the histogram, by the nearest-rank definition: the value at rank
ceil(p/100 * N) of the N sorted latencies (rank 1 for p = 0), with p taken as the exact decimal
it is written as. This equals numpy.percentile(method="inverted_cdf") except where numpy's
floating point lands just past an integer rank.

Parsing is vectorised with numpy: a log is read in blocks, every block is checked to be exactly
the expected layout (digits, single spaces, one newline per line), and its numbers are decoded
eight digits at a time from the raw bytes. A block that fails the check is parsed line by line,
and lines that do not fit are counted in `malformed_lines`.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np
import numpy.typing as npt

from howfast.analysis.percentiles import PERCENTILES, SAMPLES_METRIC, rank_interval

Point = tuple[float, float]
Series = dict[str, list[Point]]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# the word pgbench writes instead of a latency, and how it is counted
SKIPPED = "skipped"
FAILURE_WORDS = ("failed", "serialization", "deadlock", "other")

# A retries column never holds more than this (more tries than that is unheard of), while a lag
# column in microseconds always exceeds it somewhere: how a 7-field line is told apart.
MAX_PLAUSIBLE_RETRIES = 100

_BLOCK = 1 << 20  # bytes parsed at once: enough for numpy to pay off, few enough to stay in cache
_PAD = 16  # bytes before a block, so that 16-byte windows ending in its first line stay inside
_DENSE_US = 1 << 16  # latencies below this (65 ms) are counted per block in a small array
_DENSE_LONG_SPAN = 1 << 24  # longer ones are kept, then counted at the end if within this span
_MAX_DIGITS = 16


@dataclass(frozen=True)
class TxLogSummary:
    """What a set of pgbench logs says. `histogram` maps a latency in microseconds to how many
    successful transactions took exactly that long (empty for aggregated logs). `series` maps
    "tps", "latency_ms", "lag_ms", "failed", "skipped" to (t, value) points, t in seconds since
    `start_epoch` (the Unix second of the first point), one point per second (per interval for
    aggregated logs); seconds without a successful transaction have no latency point."""

    histogram: dict[int, int]
    transactions: int
    skipped: int = 0
    failed: int = 0
    failures: dict[str, int] = field(default_factory=dict)  # by the word pgbench wrote
    retried: int | None = None
    retries: int | None = None
    start_epoch: int | None = None
    series: Series = field(default_factory=dict)
    aggregated: bool = False
    interval_s: int = 1
    lines: int = 0
    malformed_lines: int = 0
    latency_max_us: int | None = None

    def metrics(self) -> dict[str, float | int]:
        """Exact latency percentiles (none for aggregated logs, whose max is still exact) and the
        transaction counts."""
        out: dict[str, float | int] = {}
        if self.histogram:
            out.update(latency_metrics(self.histogram))
        elif self.latency_max_us is not None:
            out["latency_max_ms"] = self.latency_max_us / 1000
        out["log_transactions"] = self.transactions
        if self.skipped:
            out["log_skipped"] = self.skipped
        if self.failed:
            out["log_failed"] = self.failed
        return out


# --- percentiles ---------------------------------------------------------------------------------


def _rank(p: float, n: int) -> int:
    """Nearest rank (1-based) of percentile p among n values, in exact arithmetic."""
    if not 0 <= p <= 100:
        raise ValueError(f"percentile must be within 0..100, got {p}")
    return max(1, math.ceil(Fraction(str(p)) * n / 100))


def _sorted_counts(hist: Mapping[int, int]) -> tuple[IntArray, IntArray]:
    values = np.fromiter(sorted(hist), dtype=np.int64, count=len(hist))
    counts = np.fromiter((hist[int(v)] for v in values), dtype=np.int64, count=len(hist))
    return values, np.cumsum(counts)


def percentile(hist: Mapping[int, int], p: float) -> int:
    """The nearest-rank p-th percentile of a {value: count} histogram (see the module doc)."""
    if not hist:
        raise ValueError("percentile of an empty histogram")
    values, cumulative = _sorted_counts(hist)
    rank = _rank(p, int(cumulative[-1]))
    return int(values[int(np.searchsorted(cumulative, rank, side="left"))])


def latency_metrics(hist: Mapping[int, int]) -> dict[str, float]:
    """latency_p50_ms ... latency_p999_ms and latency_max_ms from a histogram in microseconds;
    {} for an empty one."""
    if not hist:
        return {}
    values, cumulative = _sorted_counts(hist)
    n = int(cumulative[-1])
    out = {}
    for name, p in PERCENTILES.items():
        index = int(np.searchsorted(cumulative, _rank(p, n), side="left"))
        out[name] = int(values[index]) / 1000
    out["latency_max_ms"] = int(values[-1]) / 1000
    return out


def latency_intervals(hist: Mapping[int, int]) -> dict[str, float | int]:
    """`latency_samples` (how many latencies the histogram holds) and each percentile's 95%
    confidence interval, `latency_pNN_ci_low_ms` and `latency_pNN_ci_high_ms`, from order
    statistics (analysis/percentiles.py); the high bound is left out when no sample bounds
    it. {} for an empty histogram."""
    if not hist:
        return {}
    values, cumulative = _sorted_counts(hist)
    n = int(cumulative[-1])
    out: dict[str, float | int] = {SAMPLES_METRIC: n}
    for name, p in PERCENTILES.items():
        stem = name.removesuffix("_ms")
        low, high = rank_interval(n, p)
        out[f"{stem}_ci_low_ms"] = int(values[int(np.searchsorted(cumulative, low))]) / 1000
        if high is not None:
            out[f"{stem}_ci_high_ms"] = int(values[int(np.searchsorted(cumulative, high))]) / 1000
    return out


# --- reading -------------------------------------------------------------------------------------


def read_logs(
    paths: Iterable[str | os.PathLike[str]],
    *,
    lag: bool | None = None,
    retries: bool | None = None,
) -> TxLogSummary:
    """Read the logs of one run (one file per pgbench thread) into one summary.

    Lines of 7 fields end with either a schedule lag (--rate) or a retries count (--max-tries):
    say which with `lag` or `retries` when known; otherwise a column whose values never exceed
    MAX_PLAUSIBLE_RETRIES is taken for retries. Aggregated logs are recognised by their layout.
    """
    files = [Path(p) for p in paths]
    first = _first_line(files)
    if first is None:
        return TxLogSummary(histogram={}, transactions=0)
    fields = first.split()
    if _is_aggregated(fields):
        return read_aggregated_logs(files)
    totals = _Totals(_Layout(len(fields), lag=lag, retries=retries))
    for path in files:
        _read_file(path, totals)
    return totals.summary()


def _first_line(files: Sequence[Path]) -> str | None:
    for path in files:
        with path.open("rb") as f:
            for raw in f:
                if raw.strip():
                    return raw.decode("ascii", "replace")
    return None


def _is_aggregated(fields: list[str]) -> bool:
    """Aggregated lines start with a Unix time; per-transaction lines with a client number."""
    return len(fields) in (6, 10, 11, 15, 16) and fields[0].isdigit() and int(fields[0]) >= 10**8


@dataclass(frozen=True)
class _Layout:
    """Which columns a per-transaction line has: 6, 7 or 8 fields."""

    fields: int
    lag: bool | None = None
    retries: bool | None = None

    @property
    def extras(self) -> int:
        return self.fields - 6


@dataclass
class _Rows:
    """A block's lines as arrays: successful ones, and every line's second and extra columns."""

    latency: IntArray  # successful lines only
    ok_seconds: IntArray
    ok_extras: list[IntArray]  # 7th/8th columns of successful lines
    seconds: IntArray  # every line
    extras: list[IntArray]  # 7th/8th columns of every line
    word_seconds: dict[str, IntArray]  # seconds of lines with a word instead of a latency
    malformed: int = 0


def _read_file(path: Path, totals: _Totals) -> None:
    """The file, block by block: each block ends at a line end; the rest is carried over."""
    buf = np.empty(_PAD + _BLOCK + 1, np.uint8)  # +1: room for a missing final newline
    view = memoryview(buf)  # type: ignore[arg-type]
    carry = 0
    with path.open("rb", buffering=0) as f:
        while True:
            n = f.readinto(view[_PAD + carry : _PAD + _BLOCK]) or 0
            total = carry + n
            if total == 0:
                break
            if n == 0:  # the end: the last line may lack its newline
                if buf[_PAD + total - 1] != 10:
                    buf[_PAD + total] = 10
                    total += 1
                used = total
            else:
                used = _last_line_end(view[_PAD : _PAD + total])
                if used == 0:
                    if total < _BLOCK:  # a short read: read on
                        carry = total
                        continue
                    totals.lines += 1  # no log line is that long
                    totals.malformed += 1
                    carry = 0
                    continue
            totals.add(_parse_block(buf, used, totals.layout))
            carry = total - used
            if carry:
                buf[_PAD : _PAD + carry] = buf[_PAD + used : _PAD + total].copy()
            if n == 0:
                break


def _last_line_end(data: memoryview) -> int:
    """The offset just after the last newline in data, 0 when there is none."""
    tail = max(0, len(data) - (1 << 16))
    newline = bytes(data[tail:]).rfind(b"\n")
    if newline >= 0:
        return tail + newline + 1
    return bytes(data).rfind(b"\n") + 1


# --- vectorised decoding -------------------------------------------------------------------------

_ZEROS = np.uint64(0x3030303030303030)  # eight ASCII '0'
_M2 = np.uint64(0x00FF00FF00FF00FF)
_M3 = np.uint64(0x0000FFFF0000FFFF)
_ALL = (1 << 64) - 1
# _KEEP[k]: the k most significant bytes of a little-endian word, i.e. its last k characters
_KEEP = np.array([_ALL ^ ((1 << (8 * (8 - k))) - 1) for k in range(9)], dtype=np.uint64)


def _swar8(digits: npt.NDArray[np.uint64]) -> IntArray:
    """The value of eight decimal digits (bytes 0-9, the first in the lowest byte) per word,
    combining pairs, then pairs of pairs, then halves (SIMD within a register)."""
    w = (digits * np.uint64(10 * 256 + 1)) >> np.uint64(8)
    w = ((w & _M2) * np.uint64(100 * 65536 + 1)) >> np.uint64(16)
    w = ((w & _M3) * np.uint64(10000 * (1 << 32) + 1)) >> np.uint64(32)
    return w.astype(np.int64)


class _Windows:
    """Unaligned little-endian words over a block (which sits _PAD bytes into its buffer):
    `ending[e]` holds the 8 bytes before block offset e, `ending8[e]` the 8 before those, and
    `pair10[e]` the 2 bytes 10 before e (the leading digits of a 10-digit Unix time)."""

    def __init__(self, buf: npt.NDArray[np.uint8]) -> None:
        n = len(buf) - _PAD
        self.ending: npt.NDArray[np.uint64] = np.ndarray(
            (n,), dtype=np.dtype("<u8"), buffer=buf, offset=_PAD - 8, strides=(1,)
        )
        self.ending8: npt.NDArray[np.uint64] = np.ndarray(
            (n,), dtype=np.dtype("<u8"), buffer=buf, offset=_PAD - 16, strides=(1,)
        )
        self.pair10: npt.NDArray[np.uint16] = np.ndarray(
            (n,), dtype=np.dtype("<u2"), buffer=buf, offset=_PAD - 10, strides=(1,)
        )

    def numbers(self, ends: IntArray, lengths: IntArray) -> IntArray:
        """Decimal fields of 1 to 16 digits ending (exclusive) at block offsets `ends`."""
        if len(lengths) == 0:
            return np.zeros(0, np.int64)
        shortest, longest = int(lengths.min()), int(lengths.max())
        if longest <= 8:
            return _swar8((self.ending[ends] ^ _ZEROS) & _KEEP[lengths])
        if shortest == longest == 10:  # Unix times: the leading two digits are nearly always equal
            leading = self.pair10[ends]
            if (leading == leading[0]).all():
                low = _swar8(self.ending[ends] ^ _ZEROS)
                first = int(leading[0])
                return (
                    low + ((first & 0xFF) - 48) * 1_000_000_000 + ((first >> 8) - 48) * 100_000_000
                )
        values = _swar8((self.ending[ends] ^ _ZEROS) & _KEEP[np.minimum(lengths, 8)])
        long_ = lengths > 8
        ends_long = ends[long_]
        high = _swar8((self.ending8[ends_long] ^ _ZEROS) & _KEEP[lengths[long_] - 8])
        values[long_] += high * 100_000_000
        return values


def _parse_block(buf: npt.NDArray[np.uint8], used: int, layout: _Layout) -> _Rows:
    """Decode the lines in buf[_PAD:_PAD + used] (which ends with a newline)."""
    if used <= 0:
        return _parse_block_slow(b"", layout)
    rows = _parse_block_fast(buf, used, layout) if sys.byteorder == "little" else None
    if rows is None:
        rows = _parse_block_slow(bytes(buf[_PAD : _PAD + used]), layout)
    return rows


def _parse_block_fast(buf: npt.NDArray[np.uint8], used: int, layout: _Layout) -> _Rows | None:
    """None unless the block is exactly the expected layout: k fields per line of digits (or a
    known word in the latency column), separated by single spaces, each line ended by a newline.
    (Then it is parsed line by line.)"""
    k = layout.fields
    block = buf[_PAD : _PAD + used]
    is_sep = block < 48  # below '0': the separators, or garbage caught below
    seps = np.flatnonzero(is_sep)
    n = len(seps) // k
    found = block[seps]
    if (
        len(seps) != n * k
        or np.count_nonzero(found == 32) != n * (k - 1)
        or not (found[k - 1 :: k] == 10).all()  # so every line has k fields, ending in '\n'
        or is_sep[0]
        or (is_sep[1:] & is_sep[:-1]).any()  # no empty field
    ):
        return None
    cols = seps.reshape(n, k)
    windows = _Windows(buf)

    def length(j: int) -> IntArray:
        return cols[:, j] - cols[:, j - 1] - 1

    sec_len = length(4)
    extra_lens = [length(6 + i) for i in range(layout.extras)]
    if max(int(x.max()) for x in [sec_len, *extra_lens]) > _MAX_DIGITS:
        return None
    seconds = windows.numbers(cols[:, 4], sec_len)
    extras = [windows.numbers(cols[:, 6 + i], lens) for i, lens in enumerate(extra_lens)]

    lat_len = length(2)
    word_seconds: dict[str, IntArray] = {}
    ok: npt.NDArray[np.bool_] | None = None
    if int(block.max()) > 57:  # letters: a word instead of a latency, or garbage
        ok = block[cols[:, 1] + 1] < 58
        word_rows = np.flatnonzero(~ok)
        texts = [bytes(block[cols[i, 1] + 1 : cols[i, 2]]).decode("ascii") for i in word_rows]
        if sum(map(len, texts)) != np.count_nonzero(block > 57):
            return None  # non-digits somewhere else than in the latency column
        for text in set(texts):
            if text != SKIPPED and text not in FAILURE_WORDS:
                return None
            chosen = np.array([t == text for t in texts], dtype=bool)
            word_seconds[text] = seconds[word_rows[chosen]]
    lat_ends = cols[:, 2] if ok is None else cols[ok, 2]
    lat_len_ok = lat_len if ok is None else lat_len[ok]
    if len(lat_len_ok) and int(lat_len_ok.max()) > _MAX_DIGITS:
        return None
    return _Rows(
        latency=windows.numbers(lat_ends, lat_len_ok),
        ok_seconds=seconds if ok is None else seconds[ok],
        ok_extras=extras if ok is None else [x[ok] for x in extras],
        seconds=seconds,
        extras=extras,
        word_seconds=word_seconds,
    )


def _parse_block_slow(data: bytes, layout: _Layout) -> _Rows:
    """Line by line, for blocks the vectorised path refused: lines that do not fit are counted."""
    latency: list[int] = []
    ok_seconds: list[int] = []
    seconds: list[int] = []
    k = layout.fields
    extras: list[list[int]] = [[] for _ in range(layout.extras)]
    ok_rows: list[int] = []
    words: dict[str, list[int]] = {}
    malformed = 0
    for raw in data.splitlines():
        parts = raw.split()
        if not parts:
            continue
        if len(parts) != k or not all(p.isdigit() for i, p in enumerate(parts) if i != 2):
            malformed += 1
            continue
        time_field = parts[2].decode("ascii", "replace")
        if not time_field.isdigit() and time_field != SKIPPED and time_field not in FAILURE_WORDS:
            malformed += 1
            continue
        second = int(parts[4])
        row = len(seconds)
        seconds.append(second)
        for i in range(layout.extras):
            extras[i].append(int(parts[6 + i]))
        if time_field.isdigit():
            latency.append(int(time_field))
            ok_seconds.append(second)
            ok_rows.append(row)
        else:
            words.setdefault(time_field, []).append(second)
    extra_arrays = [np.array(x, dtype=np.int64) for x in extras]
    ok_index = np.array(ok_rows, dtype=np.int64)
    return _Rows(
        latency=np.array(latency, dtype=np.int64),
        ok_seconds=np.array(ok_seconds, dtype=np.int64),
        ok_extras=[x[ok_index] for x in extra_arrays],
        seconds=np.array(seconds, dtype=np.int64),
        extras=extra_arrays,
        word_seconds={w: np.array(s, dtype=np.int64) for w, s in words.items()},
        malformed=malformed,
    )


class _Totals:
    """Running counts over every block: a dense histogram of latencies below _DENSE_US plus the
    rarer longer ones, word counts, the extra columns' totals, and per-second sums (arrays from
    the first second seen). Memory grows with the run's seconds and its latencies over 65 ms,
    not with its line count."""

    def __init__(self, layout: _Layout) -> None:
        self.layout = layout
        self.lines = 0
        self.malformed = 0
        self.dense = np.zeros(_DENSE_US, np.int64)
        self.long: list[IntArray] = []
        self.words: Counter[str] = Counter()
        self.extra_sum = [0] * layout.extras
        self.extra_positive = [0] * layout.extras
        self.extra_max = [0] * layout.extras
        self.start: int | None = None
        self.per_second: dict[str, FloatArray] = {}

    def add(self, rows: _Rows) -> None:
        self.lines += len(rows.seconds) + rows.malformed
        self.malformed += rows.malformed
        if len(rows.seconds) == 0:
            return
        latency = rows.latency
        if len(latency) and int(latency.max()) >= _DENSE_US:
            short = latency < _DENSE_US
            self.long.append(latency[~short])
            latency = latency[short]
        counts = np.bincount(latency)
        self.dense[: len(counts)] += counts
        for i, column in enumerate(rows.extras):
            self.extra_sum[i] += int(column.sum())
            self.extra_positive[i] += int(np.count_nonzero(column))
            self.extra_max[i] = max(self.extra_max[i], int(column.max()))
        first = int(rows.seconds.min())
        span = int(rows.seconds.max()) - first + 1
        ok = rows.ok_seconds - first
        sums = {
            "ok": np.bincount(ok, minlength=span),
            "latency": np.bincount(ok, weights=rows.latency, minlength=span),
        }
        if rows.ok_extras:
            sums["extra"] = np.bincount(ok, weights=rows.ok_extras[0], minlength=span)
        for word, seconds in rows.word_seconds.items():
            self.words[word] += len(seconds)
            key = "skipped" if word == SKIPPED else "failed"
            counts = np.bincount(seconds - first, minlength=span)
            sums[key] = sums[key] + counts if key in sums else counts
        for key, values in sums.items():
            self._add_per_second(key, first, values.astype(np.float64))

    def _add_per_second(self, key: str, first: int, values: FloatArray) -> None:
        """Add values (one per second from `first`) to the running array, growing it."""
        if self.start is None:
            self.start = first
        if first < self.start:
            pad = self.start - first
            self.per_second = {
                k: np.concatenate([np.zeros(pad), v]) for k, v in self.per_second.items()
            }
            self.start = first
        offset = first - self.start
        total = self.per_second.get(key, np.zeros(0))
        if len(total) < offset + len(values):
            total = np.concatenate([total, np.zeros(offset + len(values) - len(total))])
        total[offset : offset + len(values)] += values
        self.per_second[key] = total

    def histogram(self) -> dict[int, int]:
        nonzero = np.flatnonzero(self.dense)
        histogram = dict(zip(nonzero.tolist(), self.dense[nonzero].tolist(), strict=True))
        if self.long:
            long = np.concatenate(self.long)
            low = int(long.min())
            if int(long.max()) - low < _DENSE_LONG_SPAN:  # counting beats sorting
                counts = np.bincount(long - low)
                values = np.flatnonzero(counts)
                counts = counts[values]
                values += low
            else:
                values, counts = np.unique(long, return_counts=True)
            histogram.update(zip(values.tolist(), counts.tolist(), strict=True))
        return histogram

    def extra_columns(self) -> tuple[bool, int | None]:
        """(whether the 7th column is a schedule lag, index among the extras of retries)."""
        layout = self.layout
        if layout.extras == 0:
            return False, None
        if layout.extras == 2:
            return True, 1
        if layout.lag is not None:
            return layout.lag, None if layout.lag else 0
        if layout.retries is not None:
            return not layout.retries, 0 if layout.retries else None
        if self.extra_max[0] <= MAX_PLAUSIBLE_RETRIES:
            return False, 0
        return True, None

    def summary(self) -> TxLogSummary:
        histogram = self.histogram()
        lag_column, retries_column = self.extra_columns()
        series: Series = {}
        if self.per_second:
            length = max(len(v) for v in self.per_second.values())
            sums = {k: np.pad(v, (0, length - len(v))) for k, v in self.per_second.items()}
            series = _per_second_series(sums, lag_column)
        failures = {w: n for w, n in self.words.items() if w != SKIPPED}
        return TxLogSummary(
            histogram=histogram,
            transactions=sum(histogram.values()),
            skipped=self.words.get(SKIPPED, 0),
            failed=sum(failures.values()),
            failures=failures,
            retried=None if retries_column is None else self.extra_positive[retries_column],
            retries=None if retries_column is None else self.extra_sum[retries_column],
            start_epoch=self.start,
            series=series,
            lines=self.lines,
            malformed_lines=self.malformed,
            latency_max_us=max(histogram) if histogram else None,
        )


def _per_second_series(sums: dict[str, FloatArray], lag_column: bool) -> Series:
    ok = sums["ok"]
    seconds = np.arange(len(ok), dtype=np.float64)
    has = ok > 0
    safe = np.where(has, ok, 1)

    def points(values: FloatArray, where: npt.NDArray[np.bool_] | None = None) -> list[Point]:
        if where is None:
            return list(zip(seconds.tolist(), values.tolist(), strict=True))
        return list(zip(seconds[where].tolist(), values[where].tolist(), strict=True))

    series: Series = {
        "tps": points(ok),
        "latency_ms": points(sums["latency"] / safe / 1000, has),
    }
    if lag_column and "extra" in sums:
        series["lag_ms"] = points(sums["extra"] / safe / 1000, has)
    for key in ("skipped", "failed"):
        if key in sums:
            series[key] = points(sums[key])
    return series


# --- aggregated logs -----------------------------------------------------------------------------


@dataclass
class _Interval:
    transactions: int = 0  # successful
    latency_sum: float = 0.0
    latency_max: int = 0
    lag_sum: float = 0.0
    skipped: int = 0
    failed: int = 0
    retried: int = 0
    retries: int = 0


def read_aggregated_logs(
    paths: Iterable[str | os.PathLike[str]], *, interval_s: int | None = None
) -> TxLogSummary:
    """Read --aggregate-interval logs (one per pgbench thread) into per-interval series. They
    hold no per-transaction latencies, so the histogram is empty; the maximum is exact."""
    intervals: dict[int, _Interval] = {}
    lines = malformed = 0
    has_lag = has_retries = False
    for path in paths:
        with Path(path).open("rb") as f:
            for raw in f:
                parts = raw.split()
                if not parts:
                    continue
                lines += 1
                if len(parts) not in (6, 10, 11, 15, 16) or not all(p.isdigit() for p in parts):
                    malformed += 1
                    continue
                values = [int(p) for p in parts]
                item = intervals.setdefault(values[0], _Interval())
                newer = len(values) >= 15  # 15+: num_transactions counts successful ones only
                skipped = values[10] if len(values) >= 11 else 0
                item.transactions += values[1] if newer else values[1] - skipped
                item.latency_sum += values[2]
                item.latency_max = max(item.latency_max, values[5])
                item.skipped += skipped
                if len(values) >= 10:
                    item.lag_sum += values[6]
                    has_lag = has_lag or values[6] > 0
                if newer:
                    item.retried += values[11]
                    item.retries += values[12]
                    item.failed += sum(values[13:])
                    has_retries = has_retries or values[12] > 0
    if not intervals:
        return TxLogSummary(histogram={}, transactions=0, aggregated=True, lines=lines)
    starts = sorted(intervals)
    steps = [b - a for a, b in itertools.pairwise(starts) if b > a]
    step = interval_s or (min(steps) if steps else 1)
    first = starts[0]
    series: Series = {"tps": [], "latency_ms": []}
    for start in starts:
        item = intervals[start]
        t = float(start - first)
        series["tps"].append((t, item.transactions / step))
        if item.transactions:
            series["latency_ms"].append((t, item.latency_sum / item.transactions / 1000))
            if has_lag:
                series.setdefault("lag_ms", []).append((t, item.lag_sum / item.transactions / 1000))
            series.setdefault("latency_max_ms", []).append((t, item.latency_max / 1000))
    total = [intervals[s] for s in starts]
    if any(i.skipped for i in total):
        series["skipped"] = [(float(s - first), float(intervals[s].skipped)) for s in starts]
    if any(i.failed for i in total):
        series["failed"] = [(float(s - first), float(intervals[s].failed)) for s in starts]
    transactions = sum(i.transactions for i in total)
    return TxLogSummary(
        histogram={},
        transactions=transactions,
        skipped=sum(i.skipped for i in total),
        failed=sum(i.failed for i in total),
        retried=sum(i.retried for i in total) if has_retries else None,
        retries=sum(i.retries for i in total) if has_retries else None,
        start_epoch=first,
        series=series,
        aggregated=True,
        interval_s=step,
        lines=lines,
        malformed_lines=malformed,
        latency_max_us=max(i.latency_max for i in total) if transactions else None,
    )
