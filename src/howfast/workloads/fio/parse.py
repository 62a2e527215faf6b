"""Parse fio's JSON output and its per-second logs. Pure: text in, numbers out.

Formats understood (learned from fio's stat.c of each release):

- fio 3.x (`json` and `json+`): latencies in nanoseconds under ``slat_ns``/``clat_ns``/
  ``lat_ns``, percentiles under ``clat_ns.percentile`` keyed like "99.000000" (and under
  ``lat_ns.percentile`` with lat_percentiles=1, since 3.18); since 3.4 a ``sync`` section whose
  ``lat_ns`` times fsync/fdatasync; ``bw_bytes`` (3.2+), ``job_runtime`` (3.8+), ``N`` (3.18+).
- fio 2.x: latencies in microseconds under ``slat``/``clat``/``lat``; the percentile table
  padded with repeated "0.00" keys; ``bw`` in KiB/s only.
- `json+` adds histogram bins ``{"latency": count}`` next to the percentiles. fio 2.x releases
  that keyed bins by index (with a "FIO_IO_U_PLAT_BITS" entry) are not decoded.

Figures are checked: a figure howfast keeps (a direction's iops, bandwidth, I/O count, run
time; the mean, sample count, the p50/p99/p99.9 percentiles and histogram bins of a latency
it reads) must be a finite, non-negative number below 2^63, or `FigureError` names its JSON
path and value. fio prints C's "nan", "-nan", "inf" for some figures it could not compute,
and 2^64-1 for counters never set: in the figures howfast does not read (bw_agg, iops_stddev,
min/max, ...) they are left alone, as fio prints them on sound runs too.

Units of the metrics returned: IOPS in operations per second, MB/s in 10^6 bytes per second
(not MiB/s), latencies in milliseconds.

Which latency: ``*_lat_*`` is fio's total latency (lat = submission + completion), the time
the issuing process waits for its I/O, as PostgreSQL's synchronous reads and writes do.
fio's completion latency alone (clat, kept as ``*_clat_*``) can mislead: with libaio,
io_submit() may perform the whole I/O, and clat then reads a few microseconds for a disk read.
For synchronous engines (psync) there is no submission latency and the two are equal.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

# Moved to howfast/walsync.py (shared with the probe analysis); still importable from here.
from howfast.walsync import commit_latency_ms as commit_latency_ms
from howfast.walsync import commit_rate_ceiling as commit_rate_ceiling
from howfast.workloads.fio.build import PREFILL_JOB

Series = list[tuple[float, float]]
LatencyUnit = Literal["ns", "us"]

# The percentiles reported, by metric suffix; fio's default list contains all of them.
_PERCENTILES = {"p50": 50.0, "p99": 99.0, "p999": 99.9}
# JSON direction sections -> metric prefix. "mixed" appears with unified_rw_reporting.
_DIRECTIONS = {"read": "read", "write": "write", "mixed": "mixed"}
_LOG_DIRECTIONS = {0: "read", 1: "write"}  # 2 (trim) is not reported
_TERMINATED = re.compile(r"^fio: terminating on signal (\d+)", re.MULTILINE)
_LOG_NAME = re.compile(r"_(?P<kind>iops|clat|lat)(?:\.\d+)?\.log$")
# C's printf of a NaN or an infinity, which fio writes unquoted into its JSON
_C_NONFINITE = re.compile(r"-?(?:nan|inf(?:inity)?)", re.IGNORECASE)
# At or above this a figure is a sentinel (2^64-1 is -1 printed unsigned, or a counter never
# set), not a measurement: 2^63 ns is 292 years, 2^63 bytes 8 EiB.
SENTINEL_FROM = 2**63


class FigureError(ValueError):
    """A figure howfast keeps is not a number fio can have measured."""

    def __init__(self, path: str, value: object) -> None:
        self.path = path
        self.value = value
        super().__init__(f"{path} is {_shown(value)}, not a figure fio can have measured")


def _shown(value: object) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # nan, inf, -inf: as C prints them
    if value is None:
        return "missing"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return json.dumps(value)


@dataclass(frozen=True)
class FioJob:
    """One job (or one reporting group) as fio reported it.

    metrics: DESIGN's fio metric names, only for what the job did: {read,write}_iops,
        {read,write}_mbps, {read,write,sync}_lat_{avg,p50,p99,p999}_ms (total latency),
        {read,write}_clat_{avg,p50,p99,p999}_ms (completion only), {read,write}_slat_avg_ms.
        "mixed_*" replaces read/write under unified_rw_reporting.
    options: the job's options as fio echoed them, global options included.
    histograms_ns: latency histograms from json+, named like the metrics ("read_lat",
        "write_clat", "sync_lat"): {latency in ns: count}. Empty for plain `json`.
    """

    name: str
    group_id: int
    error: int
    runtime_s: float
    metrics: dict[str, float]
    options: dict[str, str]
    histograms_ns: dict[str, dict[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class FioResult:
    """A parsed fio run: the version that produced it and its measured jobs, in order.
    `stopped_by_signal`: the signal fio said it was terminated on ("fio: terminating on
    signal 2", printed before its report), None when it ran to its end."""

    fio_version: str
    jobs: list[FioJob]
    stopped_by_signal: int | None = None

    @property
    def latency_unit(self) -> LatencyUnit:
        """The unit of latency values in this fio version's log files."""
        return latency_unit(self.fio_version)


def parse_output(text: str, *, skip_jobs: Collection[str] = (PREFILL_JOB,)) -> FioResult:
    """Parse fio's `--output-format=json` or `json+` output.

    Lines before or after the JSON document (fio's "fio: ..." warnings on stdout) are ignored.
    Jobs named in skip_jobs (the builder's unmeasured prefill job) are left out.
    Raises ValueError when there is no fio JSON document in the text, FigureError (a
    ValueError) when a figure it keeps is not a number fio can have measured.
    """
    doc = extract_json(text)
    global_options = _str_dict(doc.get("global options"))
    jobs = [
        _parse_job(job, global_options, f"jobs[{index}]")
        for index, job in enumerate(doc["jobs"])
        if str(job.get("jobname", "")) not in skip_jobs
    ]
    signal = _TERMINATED.search(text)
    return FioResult(
        fio_version=str(doc.get("fio version", "")),
        jobs=jobs,
        stopped_by_signal=int(signal[1]) if signal else None,
    )


def extract_json(text: str) -> dict[str, Any]:
    """The fio JSON document inside text, which may carry other lines around it."""
    # strict=False: fio does not escape control characters inside option values.
    decoder = json.JSONDecoder(strict=False)
    for match in re.finditer(r"^\s*\{", text, re.MULTILINE):
        doc = _decode_with_c_nonfinite(decoder, text, match.end() - 1)
        if isinstance(doc, dict) and isinstance(doc.get("jobs"), list):
            return doc
    raise ValueError("no fio JSON output found (expected a JSON object with a 'jobs' list)")


def _decode_with_c_nonfinite(decoder: json.JSONDecoder, text: str, start: int) -> Any:
    """The JSON value at `start`, reading the "nan", "-nan" and "inf" C prints (fio writes
    them unquoted) as NaN and infinities; None when there is no JSON value there. Each such
    token is replaced where the decoder stops at it, so none inside a string is touched."""
    for _ in range(1000):  # a document with more of them is not fio's
        try:
            return decoder.raw_decode(text, start)[0]
        except json.JSONDecodeError as exc:
            token = _C_NONFINITE.match(text, exc.pos)
            if token is None:
                return None
            word = token[0].lower()
            spelled = "NaN" if "nan" in word else ("-Infinity" if word[0] == "-" else "Infinity")
            text = text[: exc.pos] + spelled + text[token.end() :]
    return None


def latency_unit(fio_version: str) -> LatencyUnit:
    """fio 3.0 moved latencies, in JSON and in latency logs, from microseconds to nanoseconds."""
    match = re.search(r"(\d+)\.", fio_version)
    return "us" if match and int(match[1]) < 3 else "ns"


@dataclass(frozen=True)
class LogEntry:
    """One line of a fio log: time since the job started (ms), value, direction (0 read,
    1 write, 2 trim). Block size, offset and priority are not kept: with log_avg_msec they
    are always 0."""

    time_ms: int
    value: float
    direction: int


def parse_log(text: str) -> list[LogEntry]:
    """Parse a fio iops/lat/clat/bw log: lines `time, value, direction, bs, offset[, prio]`."""
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = [part.strip() for part in line.split(",")]
        if len(fields) < 3:
            raise ValueError(f"fio log line {number}: expected at least 3 fields: {line!r}")
        try:
            entries.append(LogEntry(int(fields[0]), float(fields[1]), int(fields[2])))
        except ValueError as exc:
            raise ValueError(f"fio log line {number}: {exc}: {line!r}") from None
    return entries


def log_series(logs: Mapping[str, str], *, unit: LatencyUnit = "ns") -> dict[str, Series]:
    """Per-second series from fio's log files, given as {file name: content}.

    Recognised names: `*_iops[.N].log` and `*_lat[.N].log` (total latency, like the metrics)
    or else `*_clat[.N].log` (completion latency); other files are ignored. unit is the unit of
    latency values in the logs (see latency_unit). Returns "read_iops", "write_iops",
    "read_lat_ms", "write_lat_ms" (only those present) as lists of (seconds since the job
    started, value). fio writes a last, partial-window line when the job ends, so the final
    time may repeat. Several jobs' logs (numjobs > 1) are combined per whole second: IOPS
    added up, latencies averaged.
    """
    by_kind: dict[str, list[list[LogEntry]]] = defaultdict(list)
    for name in sorted(logs):
        match = _LOG_NAME.search(name)
        if match:
            by_kind[match["kind"]].append(parse_log(logs[name]))
    to_ms = 1e-6 if unit == "ns" else 1e-3
    series: dict[str, Series] = {}
    _add_series(series, by_kind.get("iops", []), "iops", scale=1.0, combine=sum)
    latency_logs = by_kind.get("lat") or by_kind.get("clat") or []
    _add_series(series, latency_logs, "lat_ms", scale=to_ms, combine=_mean)
    return series


def _add_series(
    series: dict[str, Series],
    files: list[list[LogEntry]],
    suffix: str,
    *,
    scale: float,
    combine: Callable[[list[float]], float],
) -> None:
    for direction, prefix in _LOG_DIRECTIONS.items():
        per_file = [[e for e in entries if e.direction == direction] for entries in files]
        per_file = [entries for entries in per_file if entries]
        if not per_file:
            continue
        if len(per_file) == 1:
            points = [(e.time_ms / 1000, e.value * scale) for e in per_file[0]]
        else:
            grouped: dict[int, list[float]] = defaultdict(list)
            for entries in per_file:
                for e in entries:
                    grouped[round(e.time_ms / 1000)].append(e.value * scale)
            points = [(float(t), float(combine(values))) for t, values in sorted(grouped.items())]
        series[f"{prefix}_{suffix}"] = points


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _parse_job(job: Mapping[str, Any], global_options: dict[str, str], path: str) -> FioJob:
    options = {**global_options, **_str_dict(job.get("job options"))}
    # Before fio 3.18, lat_percentiles=1 replaced the completion-latency percentiles (still
    # printed under "clat") by those of the total latency; since, both tables are printed.
    lat_percentiles_on = options.get("lat_percentiles") == "1"
    metrics: dict[str, float] = {}
    histograms: dict[str, dict[int, int]] = {}
    runtimes_ms: list[float] = []
    for section, prefix in _DIRECTIONS.items():
        data = job.get(section)
        where = f"{path}.{section}"
        if data is None:
            continue
        if not isinstance(data, Mapping):  # "read": "fast" is no section fio writes
            raise FigureError(where, data)
        if not _did_io(data, where):
            continue
        runtimes_ms.append(_figure(data, "runtime", where, 0))
        metrics[f"{prefix}_iops"] = _figure(data, "iops", where)
        metrics[f"{prefix}_mbps"] = _bytes_per_s(data, where) / 1e6
        stats = _direction_latency(data, where, lat_percentiles_on=lat_percentiles_on)
        for name, latency in stats.items():
            metrics.update(latency.metrics(f"{prefix}_{name}"))
            if latency.bins_ns:
                histograms[f"{prefix}_{name}"] = latency.bins_ns
    sync = job.get("sync")  # fio >= 3.4: fsync/fdatasync timed apart from the writes
    if isinstance(sync, Mapping) and isinstance(sync.get("lat_ns"), Mapping):
        latency = _Latency.from_stat(sync["lat_ns"], f"{path}.sync.lat_ns", ns=True)
        if latency.samples > 0:
            metrics.update(latency.metrics("sync_lat"))
            if latency.bins_ns:
                histograms["sync_lat"] = latency.bins_ns
    if "job_runtime" in job:  # fio >= 3.8: the job's whole run time in ms
        runtime_s = _figure(job, "job_runtime", path) / 1000
    else:
        runtime_s = max(runtimes_ms, default=0.0) / 1000
    return FioJob(
        name=str(job.get("jobname", "")),
        group_id=int(job.get("groupid", 0)),
        error=int(job.get("error", 0)),
        runtime_s=runtime_s,
        metrics=metrics,
        options=options,
        histograms_ns=histograms,
    )


def _figure(data: Mapping[str, Any], key: str, path: str, default: float | None = None) -> float:
    """data[key] as a figure fio measured; FigureError, naming `path.key`, when it is not one."""
    value = data.get(key, default)
    return _checked(value, f"{path}.{key}")


def _checked(value: object, path: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value < SENTINEL_FROM  # also false for NaN
    ):
        raise FigureError(path, value)
    return float(value)


def _did_io(data: Mapping[str, Any], path: str) -> bool:
    """Whether a direction did I/O, by the counters every fio writes in it; without them,
    its figures would be stored as an unmeasured direction without a word."""
    if "total_ios" not in data and "io_bytes" not in data:
        raise FigureError(f"{path}.total_ios", None)
    if "total_ios" in data:
        return _figure(data, "total_ios", path) > 0
    return _figure(data, "io_bytes", path, 0) > 0


def _bytes_per_s(data: Mapping[str, Any], path: str) -> float:
    if "bw_bytes" in data:  # fio >= 3.2
        return _figure(data, "bw_bytes", path)
    return _figure(data, "bw", path, 0) * 1024  # KiB/s


@dataclass(frozen=True)
class _Latency:
    mean_ms: float
    samples: float
    percentiles_ms: dict[str, float]  # "p50" -> ms
    bins_ns: dict[int, int]

    @classmethod
    def from_stat(cls, stat: Mapping[str, Any], path: str, *, ns: bool) -> _Latency:
        """The stat's figures; its percentiles and bins only when it has samples (fio
        leaves an unused table as it was)."""
        to_ms = 1e-6 if ns else 1e-3
        mean = _figure(stat, "mean", path, 0)
        # "N" (fio >= 3.18) counts the samples; before it, a mean of 0 means there were none.
        samples = _figure(stat, "N", path) if "N" in stat else float(mean > 0)
        if samples == 0:
            return cls(mean_ms=mean * to_ms, samples=0, percentiles_ms={}, bins_ns={})
        return cls(
            mean_ms=mean * to_ms,
            samples=samples,
            percentiles_ms=_percentiles(stat.get("percentile"), to_ms, f"{path}.percentile"),
            bins_ns=_bins(stat.get("bins"), 1 if ns else 1000, f"{path}.bins"),
        )

    def without_distribution(self) -> _Latency:
        return _Latency(self.mean_ms, self.samples, {}, {})

    def metrics(self, prefix: str) -> dict[str, float]:
        metrics = {f"{prefix}_avg_ms": self.mean_ms}
        for name, value in self.percentiles_ms.items():
            metrics[f"{prefix}_{name}_ms"] = value
        return metrics


def _direction_latency(
    data: Mapping[str, Any], path: str, *, lat_percentiles_on: bool
) -> dict[str, _Latency]:
    """The latencies of one direction, by metric infix: "lat" (total: submission plus
    completion, what the issuing process waits), "clat" (completion only) and "slat"
    (submission). fio 3 reports ns under *_ns keys, fio 2 usec under the bare names.

    The total latency's percentiles come from fio's own table when it computed one; else
    from the completion table when that is the same thing: the table held total latencies
    (lat_percentiles before 3.18), or there was no submission latency (synchronous
    engines, whose completion latency is the whole call). Otherwise the total latency has
    only its mean, and the percentiles stay under clat.
    """
    ns = "clat_ns" in data or "lat_ns" in data
    suffix = "_ns" if ns else ""
    stats = {}
    for name in ("lat", "clat", "slat"):
        stat = data.get(name + suffix)
        if isinstance(stat, Mapping):
            stats[name] = _Latency.from_stat(stat, f"{path}.{name}{suffix}", ns=ns)
    lat, clat, slat = stats.get("lat"), stats.get("clat"), stats.get("slat")
    # The completion table holds total latencies when fio had no separate table for them.
    clat_is_total = lat_percentiles_on and (lat is None or not lat.percentiles_ms)
    result: dict[str, _Latency] = {}
    if lat is not None and lat.samples > 0:
        if not lat.percentiles_ms and clat is not None:
            no_submission = slat is None or slat.samples == 0 or slat.mean_ms == 0
            if clat_is_total or no_submission:
                lat = _Latency(lat.mean_ms, lat.samples, clat.percentiles_ms, clat.bins_ns)
        result["lat"] = lat
    if clat is not None and clat.samples > 0:
        result["clat"] = clat.without_distribution() if clat_is_total else clat
    if slat is not None and slat.samples > 0 and slat.mean_ms > 0:
        result["slat"] = slat.without_distribution()
    return result


def _percentiles(table: Any, to_ms: float, path: str) -> dict[str, float]:
    """Pick p50/p99/p99.9 out of fio's table keyed "99.000000" (fio 2.x pads the table with
    repeated "0.00" keys, which match nothing); only those are checked."""
    if not isinstance(table, Mapping):
        return {}
    found = {}
    for key, value in table.items():
        try:
            pct = float(key)
        except ValueError:
            continue
        for name, wanted in _PERCENTILES.items():
            if abs(pct - wanted) < 1e-6:
                found[name] = _checked(value, f'{path}["{key}"]') * to_ms
    return found


def _bins(bins: Any, to_ns: int, path: str) -> dict[int, int]:
    # Keys are latencies (ns in fio 3, usec in fio 2). Old index-keyed bins are skipped.
    if not isinstance(bins, Mapping) or "FIO_IO_U_PLAT_BITS" in bins:
        return {}
    counts = {}
    for key, count in bins.items():
        if str(key).isdigit():
            counts[int(key) * to_ns] = int(_checked(count, f'{path}["{key}"]'))
    return counts


def _str_dict(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items()}
