"""fio profiles, job-file builder and parsers, against recorded outputs (tests/data/fio)."""

from __future__ import annotations

import configparser
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from howfast.workloads.fio.build import (
    PREFILL_JOB,
    TEST_FILE_NAME,
    build_argv,
    build_jobfile,
    fio_file_path,
    list_profiles,
    profile_text,
)
from howfast.workloads.fio.parse import (
    FigureError,
    commit_latency_ms,
    commit_rate_ceiling,
    extract_json,
    latency_unit,
    log_series,
    parse_log,
    parse_output,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "fio"
PROFILES = [
    "rand-read-4k-qd64",
    "rand-write-4k-qd64",
    "randrw-4k-qd1",
    "seq-read-8k-qd32",
    "seq-write-8k-qd32",
    "wal-fsync",
]
MIB = 1 << 20


def sections(jobfile: str) -> configparser.ConfigParser:
    """The job file read as INI: sections in order, bare flags (stonewall) as None."""
    parser = configparser.ConfigParser(
        allow_no_value=True, comment_prefixes=(";", "#"), interpolation=None, strict=True
    )
    parser.read_string(jobfile)
    return parser


def option_lines(jobfile: str) -> list[str]:
    return [
        line.strip()
        for line in jobfile.splitlines()
        if line.strip() and not line.lstrip().startswith((";", "#"))
    ]


def build(profile: str = "randrw-4k-qd1", **kwargs: object) -> str:
    args: dict[str, object] = {
        "directory": "/data/under/test",
        "size_bytes": 32 * MIB,
        "runtime_s": 10,
    }
    args.update(kwargs)
    return build_jobfile(profile, **args)  # type: ignore[arg-type]


def data(name: str) -> str:
    return (DATA / name).read_text()


# --- profiles ---------------------------------------------------------------------------


def test_list_profiles_names_and_descriptions() -> None:
    infos = list_profiles()
    assert [p.name for p in infos] == PROFILES
    by_name = {p.name: p.description for p in infos}
    assert all(by_name.values())
    assert "fdatasync" in by_name["wal-fsync"]
    assert "queue depth 32" in by_name["seq-read-8k-qd32"]


@pytest.mark.parametrize("profile", PROFILES)
def test_profile_text_is_a_commented_fio_job(profile: str) -> None:
    text = profile_text(profile)
    assert text.startswith("; What:")
    assert "; Why:" in text
    assert f"[{profile}]" in text
    assert "gtod_reduce" not in text


def test_unknown_profile_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"known profiles: rand-read-4k-qd64, .*wal-fsync"):
        profile_text("nope")
    with pytest.raises(ValueError, match="seq-read-8k-qd32"):
        build("nope")


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ("seq-read-8k-qd32", {"rw": "read", "bs": "8k", "iodepth": "32"}),
        ("seq-write-8k-qd32", {"rw": "write", "bs": "8k", "iodepth": "32"}),
        ("rand-read-4k-qd64", {"rw": "randread", "bs": "4k", "iodepth": "64"}),
        ("rand-write-4k-qd64", {"rw": "randwrite", "bs": "4k", "iodepth": "64"}),
        ("randrw-4k-qd1", {"rw": "randrw", "rwmixread": "50", "bs": "4k", "iodepth": "1"}),
        (
            "wal-fsync",
            {"rw": "write", "bs": "8k", "iodepth": "1", "fdatasync": "1", "ioengine": "psync"},
        ),
    ],
)
def test_profile_io_pattern(profile: str, expected: dict[str, str]) -> None:
    measured = sections(build(profile))[profile]
    for key, value in expected.items():
        assert measured[key] == value


# --- builder ----------------------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
def test_jobfile_structure(profile: str) -> None:
    text = build(profile, size_bytes=64 * MIB, runtime_s=30)
    ini = sections(text)
    assert ini.sections() == ["global", PREFILL_JOB, profile]
    glob = ini["global"]
    assert glob["filename"] == f"/data/under/test/{TEST_FILE_NAME}"
    assert glob["size"] == str(64 * MIB)
    assert glob["ioengine"] == "libaio"
    assert glob["direct"] == "1"
    assert glob["lat_percentiles"] == "1"
    # Latency must be measured: gtod_reduce would turn it off.
    assert not any(line.startswith("gtod_reduce") for line in option_lines(text))
    # The prefill writes the whole file sequentially, once, before anything is measured.
    prefill = ini[PREFILL_JOB]
    assert prefill["rw"] == "write"
    assert (64 * MIB) % int(prefill["bs"]) == 0
    assert prefill["end_fsync"] == "1"
    assert "time_based" not in prefill
    assert "runtime" not in prefill
    # The measured job waits for it and runs for the runtime.
    measured = ini[profile]
    assert "stonewall" in measured
    assert "time_based" in measured
    assert measured["runtime"] == "30"
    assert text.index(f"[{PREFILL_JOB}]") < text.index(f"[{profile}]")


def test_jobfile_header_explains_the_profile() -> None:
    text = build("wal-fsync")
    assert text.startswith("; howfast fio job file, profile wal-fsync\n")
    assert "; What: sequential 8 KiB writes, each followed by fdatasync()" in text


def test_direct_switch() -> None:
    assert sections(build("rand-read-4k-qd64"))["global"]["direct"] == "1"
    text = build("rand-read-4k-qd64", direct=False)
    assert sections(text)["global"]["direct"] == "0"
    assert "direct=1" not in option_lines(text)


def test_wal_fsync_writes_through_the_page_cache_like_postgresql() -> None:
    for direct in (True, False):
        ini = sections(build("wal-fsync", direct=direct))
        assert ini["wal-fsync"]["direct"] == "0"
        assert ini["wal-fsync"]["ioengine"] == "psync"


def test_ioengine_override() -> None:
    ini = sections(build("seq-read-8k-qd32", ioengine="psync"))
    assert ini["global"]["ioengine"] == "psync"
    assert "ioengine" not in ini["seq-read-8k-qd32"]


def test_log_options_only_with_a_log_dir_and_only_on_the_measured_job() -> None:
    text = build("seq-write-8k-qd32", log_dir="/var/log/howfast/step-3")
    ini = sections(text)
    measured = ini["seq-write-8k-qd32"]
    assert measured["write_iops_log"] == "/var/log/howfast/step-3/seq-write-8k-qd32"
    assert measured["write_lat_log"] == "/var/log/howfast/step-3/seq-write-8k-qd32"
    assert measured["log_avg_msec"] == "1000"
    for name in ("global", PREFILL_JOB):
        assert not any(key.startswith(("write_", "log_")) for key in ini[name])
    assert not any("_log" in line for line in option_lines(build("seq-write-8k-qd32")))


def test_fio_file_path_is_the_jobs_filename() -> None:
    path = fio_file_path("/data/under/test")
    assert str(path) == f"/data/under/test/{TEST_FILE_NAME}"
    assert sections(build())["global"]["filename"] == str(path)


def test_filename_colon_is_escaped() -> None:
    ini = sections(build(directory="/mnt/a:b"))
    assert ini["global"]["filename"] == f"/mnt/a\\:b/{TEST_FILE_NAME}"


@pytest.mark.parametrize("size", [0, 4096, 32 * MIB + 1])
def test_bad_size(size: int) -> None:
    with pytest.raises(ValueError, match="size_bytes"):
        build(size_bytes=size)


def test_size_not_a_multiple_of_a_mebibyte_gets_a_smaller_prefill_block() -> None:
    ini = sections(build(size_bytes=MIB + 8192))
    assert ini[PREFILL_JOB]["bs"] == "8192"


def test_bad_runtime_and_line_breaks() -> None:
    with pytest.raises(ValueError, match="runtime_s"):
        build(runtime_s=0)
    with pytest.raises(ValueError, match="line break"):
        build(directory="/tmp/a\nb")


def test_build_argv() -> None:
    assert build_argv("/usr/bin/fio", "/tmp/job.fio", "/tmp/out.json") == [
        "/usr/bin/fio",
        "--output-format=json+",
        "--output=/tmp/out.json",
        "/tmp/job.fio",
    ]


# --- parser: real fio 3.33 json+ ----------------------------------------------------------

# (file, job, runtime_s, {metric: value}) read off the recorded JSON by hand: IOPS as fio
# printed them, MB/s = bw_bytes / 10^6, latencies = ns / 10^6.
REAL_JSON_PLUS = [
    (
        "fio-3.33_seq-read-8k-qd32.json",
        "seq-read-8k-qd32",
        2.002,
        {
            "read_iops": 27717.923115,
            "read_mbps": 227.065226,
            "read_lat_avg_ms": 1.153078137791,
            "read_lat_p50_ms": 0.593920,
            "read_lat_p99_ms": 7.241728,
            "read_lat_p999_ms": 28.180480,
            "read_clat_avg_ms": 1.137035540752,
            "read_clat_p99_ms": 7.176192,
            "read_slat_avg_ms": 0.016042597039,
        },
    ),
    (
        "fio-3.33_seq-write-8k-qd32.json",
        "seq-write-8k-qd32",
        2.0,
        {
            "write_iops": 34037.481259,
            "write_mbps": 278.835046,
            "write_lat_avg_ms": 0.939213681408,
            "write_lat_p50_ms": 0.477184,
            "write_lat_p99_ms": 7.307264,
            "write_lat_p999_ms": 16.056320,
        },
    ),
    (
        "fio-3.33_rand-read-4k-qd64.json",
        "rand-read-4k-qd64",
        2.001,
        {
            "read_iops": 52588.911089,
            "read_mbps": 215.404179,
            "read_lat_avg_ms": 1.214908368483,
            "read_lat_p50_ms": 0.847872,
            "read_lat_p99_ms": 4.882432,
            "read_lat_p999_ms": 15.663104,
        },
    ),
    (
        "fio-3.33_rand-write-4k-qd64.json",
        "rand-write-4k-qd64",
        2.0,
        {
            "write_iops": 35227.386307,
            "write_mbps": 144.291374,
            "write_lat_avg_ms": 1.814899803717,
            "write_lat_p50_ms": 0.913408,
            "write_lat_p99_ms": 8.093696,
            "write_lat_p999_ms": 23.724032,
        },
    ),
    (
        "fio-3.33_randrw-4k-qd1.json",
        "randrw-4k-qd1",
        2.0,
        {
            "read_iops": 3421.289355,
            "read_mbps": 14.013601,
            "read_lat_avg_ms": 0.138377703915,
            "read_lat_p50_ms": 0.063744,
            "read_lat_p99_ms": 2.179072,
            "read_lat_p999_ms": 6.979584,
            "read_clat_p50_ms": 0.001576,
            "write_iops": 3494.752624,
            "write_mbps": 14.314506,
            "write_lat_avg_ms": 0.145627869584,
            "write_lat_p50_ms": 0.065280,
            "write_lat_p99_ms": 1.990656,
            "write_lat_p999_ms": 8.716288,
        },
    ),
    (
        "fio-3.33_wal-fsync.json",
        "wal-fsync",
        2.0,
        {
            "write_iops": 2289.855072,
            "write_mbps": 18.758492,
            "write_lat_avg_ms": 0.015026458315,
            "write_lat_p50_ms": 0.008384,
            "write_lat_p99_ms": 0.051968,
            "write_lat_p999_ms": 1.761280,
            "sync_lat_avg_ms": 0.417773182235,
            "sync_lat_p50_ms": 0.127488,
            "sync_lat_p99_ms": 7.438336,
            "sync_lat_p999_ms": 40.108032,
        },
    ),
]


@pytest.mark.parametrize(("name", "job", "runtime_s", "expected"), REAL_JSON_PLUS)
def test_real_json_plus(name: str, job: str, runtime_s: float, expected: dict[str, float]) -> None:
    result = parse_output(data(name))
    assert result.fio_version == "fio-3.33"
    assert result.latency_unit == "ns"
    assert [j.name for j in result.jobs] == [job]  # the prefill job is left out
    measured = result.jobs[0]
    assert measured.group_id == 1
    assert measured.error == 0
    assert measured.runtime_s == runtime_s
    for metric, value in expected.items():
        assert measured.metrics[metric] == pytest.approx(value, rel=1e-12), metric


@pytest.mark.parametrize(("name", "job", "runtime_s", "expected"), REAL_JSON_PLUS)
def test_only_what_the_job_did(name: str, job: str, runtime_s: float, expected: object) -> None:
    metrics = parse_output(data(name)).jobs[0].metrics
    reads = "read" in job or "randrw" in job
    writes = "write" in job or "randrw" in job or job == "wal-fsync"
    assert ("read_iops" in metrics) == reads
    assert ("write_iops" in metrics) == writes
    assert ("sync_lat_avg_ms" in metrics) == (job == "wal-fsync")
    assert not any(key.startswith(("trim_", "mixed_")) for key in metrics)


def test_options_seen_include_global_and_job_options() -> None:
    job = parse_output(data("fio-3.33_wal-fsync.json")).jobs[0]
    assert job.options["size"] == "33554432"
    assert job.options["lat_percentiles"] == "1"
    assert job.options["direct"] == "0"  # the job's own value wins over the global one
    assert job.options["ioengine"] == "psync"
    assert job.options["fdatasync"] == "1"
    assert job.options["log_avg_msec"] == "1000"


def test_prefill_is_reported_when_asked_for() -> None:
    result = parse_output(data("fio-3.33_seq-read-8k-qd32.json"), skip_jobs=())
    assert [j.name for j in result.jobs] == [PREFILL_JOB, "seq-read-8k-qd32"]
    prefill = result.jobs[0]
    assert prefill.group_id == 0
    assert set(prefill.metrics) >= {"write_iops", "write_lat_avg_ms"}
    assert "read_iops" not in prefill.metrics


def test_json_plus_histograms_hold_every_sample() -> None:
    raw = json.loads(data("fio-3.33_randrw-4k-qd1.json"))["jobs"][1]
    job = parse_output(data("fio-3.33_randrw-4k-qd1.json")).jobs[0]
    assert set(job.histograms_ns) == {"read_lat", "read_clat", "write_lat", "write_clat"}
    assert sum(job.histograms_ns["read_lat"].values()) == raw["read"]["total_ios"] == 6846
    assert sum(job.histograms_ns["write_clat"].values()) == raw["write"]["total_ios"]
    assert min(job.histograms_ns["read_lat"]) >= raw["read"]["lat_ns"]["min"] // 2
    wal = parse_output(data("fio-3.33_wal-fsync.json")).jobs[0]
    assert sum(wal.histograms_ns["sync_lat"].values()) == 4582  # sync lat_ns "N"


def test_total_latency_not_completion_latency_for_libaio() -> None:
    # With libaio io_submit() does most of a QD1 I/O here: completion latency alone says
    # 1.6 us at the median, the process waited 64 us.
    metrics = parse_output(data("fio-3.33_randrw-4k-qd1.json")).jobs[0].metrics
    assert metrics["read_clat_p50_ms"] == pytest.approx(0.001576)
    assert metrics["read_lat_p50_ms"] == pytest.approx(0.063744)
    assert metrics["read_lat_avg_ms"] == pytest.approx(
        metrics["read_clat_avg_ms"] + metrics["read_slat_avg_ms"], rel=1e-9
    )


def test_plain_json_has_no_histograms() -> None:
    result = parse_output(data("fio-3.33_randrw-4k-qd1_json.json"))
    assert result.fio_version == "fio-3.33"
    job = result.jobs[0]
    assert job.runtime_s == 2.066
    assert job.histograms_ns == {}
    assert job.metrics["read_iops"] == pytest.approx(2217.223029)
    assert job.metrics["read_mbps"] == pytest.approx(9.081745)
    assert job.metrics["read_lat_avg_ms"] == pytest.approx(0.193080550076)
    assert job.metrics["read_lat_p99_ms"] == pytest.approx(2.244608)
    assert job.metrics["write_iops"] == pytest.approx(2294.629898)
    assert job.metrics["write_lat_p999_ms"] == pytest.approx(30.539776)


def test_stdout_with_a_note_before_the_json() -> None:
    text = data("fio-3.33_rand-read-4k-qd64_psync.stdout")
    assert text.startswith("note: both iodepth >= 1 and synchronous I/O engine")
    job = parse_output(text).jobs[0]
    assert job.options["ioengine"] == "psync"
    assert job.metrics["read_iops"] == pytest.approx(7611.694153)
    assert job.metrics["read_lat_avg_ms"] == pytest.approx(0.130398189876)
    assert job.metrics["read_lat_p99_ms"] == pytest.approx(1.171456)
    assert "read_slat_avg_ms" not in job.metrics  # a synchronous engine has none


def test_garbage_after_the_json_and_braces_before_it() -> None:
    text = (
        "fio: {not json} warning\n"
        + data("fio-3.33_wal-fsync.json")
        + "\nfio: file hash not empty on exit\n"
    )
    assert parse_output(text).jobs[0].metrics == (
        parse_output(data("fio-3.33_wal-fsync.json")).jobs[0].metrics
    )


def test_no_json_is_an_error() -> None:
    with pytest.raises(ValueError, match="no fio JSON"):
        parse_output("fio: pid=0, err=22/file:filesetup.c:805, func=open(), error=Invalid\n")
    with pytest.raises(ValueError, match="no fio JSON"):
        extract_json('{"other": "document"}')


def test_commit_latency_is_write_plus_sync() -> None:
    metrics = parse_output(data("fio-3.33_wal-fsync.json")).jobs[0].metrics
    flush_ms = commit_latency_ms(metrics)
    assert flush_ms == pytest.approx(0.015026458315 + 0.417773182235)
    assert commit_rate_ceiling(flush_ms or 0.0) == pytest.approx(1000 / 0.43279964055)
    assert commit_latency_ms({"write_lat_avg_ms": 1.0}) is None
    with pytest.raises(ValueError):
        commit_rate_ceiling(0.0)


# --- parser: fio 2.x (constructed) and older 3.x semantics -------------------------------


def test_fio2_microseconds_and_kib() -> None:
    result = parse_output(data("fio-2.15_constructed.json"))
    assert result.fio_version == "fio-2.15"
    assert result.latency_unit == "us"
    assert [j.name for j in result.jobs] == ["randrw-qd1", "fdatasync-8k"]
    randrw, wal = result.jobs
    assert randrw.runtime_s == 2.001  # no job_runtime: the longest direction
    assert randrw.histograms_ns == {}
    m = randrw.metrics
    assert m["read_iops"] == pytest.approx(3421.289355)
    assert m["read_mbps"] == pytest.approx(13685 * 1024 / 1e6)  # bw in KiB/s
    assert m["read_lat_avg_ms"] == pytest.approx(0.138377704)  # lat mean 138.377704 usec
    assert m["read_clat_avg_ms"] == pytest.approx(0.076466923)
    assert m["read_clat_p50_ms"] == pytest.approx(0.002)  # "50.000000" : 2 usec
    assert m["read_clat_p99_ms"] == pytest.approx(1.794)
    assert m["read_clat_p999_ms"] == pytest.approx(6.914)
    assert m["read_slat_avg_ms"] == pytest.approx(0.061910781)
    # Submission latency but no total-latency table: the total has its mean only.
    assert "read_lat_p99_ms" not in m
    assert m["write_iops"] == pytest.approx(3494.752624)
    # A synchronous engine: no submission latency, so the completion table is the total's.
    w = wal.metrics
    assert w["write_iops"] == pytest.approx(2289.855072)
    assert w["write_lat_avg_ms"] == pytest.approx(0.015026458)
    assert w["write_lat_p50_ms"] == pytest.approx(0.008)
    assert w["write_lat_p99_ms"] == pytest.approx(0.049)
    assert "sync_lat_avg_ms" not in w  # fio 2 did not report fsync/fdatasync latency
    assert "read_iops" not in w


def _fio31_job(options: dict[str, str]) -> str:
    """A fio 3.1-shaped job (lat_ns without N or percentiles, no sync section)."""
    read = {
        "io_bytes": 8192000,
        "io_kbytes": 8000,
        "bw": 4000,
        "iops": 1000.0,
        "runtime": 2000,
        "total_ios": 2000,
        "slat_ns": {"min": 1000, "max": 9000, "mean": 5000.0, "stddev": 1.0},
        "clat_ns": {
            "min": 1000,
            "max": 900000,
            "mean": 95000.0,
            "stddev": 1.0,
            "percentile": {"50.000000": 80000, "99.000000": 700000, "99.900000": 880000},
        },
        "lat_ns": {"min": 2000, "max": 909000, "mean": 100000.0, "stddev": 1.0},
    }
    job = {"jobname": "j", "groupid": 0, "error": 0, "job options": options, "read": read}
    return json.dumps({"fio version": "fio-3.1", "jobs": [job]})


def test_before_fio_3_18_lat_percentiles_replace_the_clat_table() -> None:
    m = parse_output(_fio31_job({"lat_percentiles": "1"})).jobs[0].metrics
    assert m["read_lat_avg_ms"] == pytest.approx(0.1)
    assert m["read_lat_p99_ms"] == pytest.approx(0.7)
    assert m["read_clat_avg_ms"] == pytest.approx(0.095)
    assert "read_clat_p99_ms" not in m
    assert m["read_mbps"] == pytest.approx(4000 * 1024 / 1e6)
    m = parse_output(_fio31_job({})).jobs[0].metrics
    assert m["read_clat_p99_ms"] == pytest.approx(0.7)
    assert "read_lat_p99_ms" not in m


def test_latency_unit_by_version() -> None:
    assert latency_unit("fio-2.21") == "us"
    assert latency_unit("fio-3.0") == "ns"
    assert latency_unit("fio-3.33") == "ns"
    assert latency_unit("") == "ns"


# --- logs -------------------------------------------------------------------------------


def test_parse_log_real_lines() -> None:
    entries = parse_log(data("randrw-4k-qd1_lat.2.log"))
    assert [(e.time_ms, e.value, e.direction) for e in entries] == [
        (1000, 165403.0, 0),
        (1009, 180782.0, 1),
        (2000, 120307.0, 1),
        (2000, 119855.0, 0),
    ]
    with pytest.raises(ValueError, match="line 2"):
        parse_log("1000, 5, 0, 0, 0\nnot a log line\n")


def _logs(prefix: str, kinds: tuple[str, ...] = ("iops", "lat", "clat")) -> dict[str, str]:
    return {f"{prefix}_{k}.2.log": data(f"{prefix}_{k}.2.log") for k in kinds}


def points(series: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Values rounded to 9 decimals: ns -> ms conversions are not exact in binary."""
    return [(t, round(value, 9)) for t, value in series]


def test_log_series_randrw() -> None:
    series = log_series(_logs("randrw-4k-qd1"))
    assert set(series) == {"read_iops", "write_iops", "read_lat_ms", "write_lat_ms"}
    assert series["read_iops"] == [(1.006, 2767.0)]
    assert series["write_iops"] == [(1.006, 2909.0)]
    # From the total-latency log (_lat), like the metrics; ns -> ms.
    assert points(series["read_lat_ms"]) == [(1.0, 0.165403), (2.0, 0.119855)]
    assert points(series["write_lat_ms"]) == [(1.009, 0.180782), (2.0, 0.120307)]


def test_log_series_falls_back_to_completion_latency() -> None:
    series = log_series(_logs("wal-fsync", ("iops", "clat")))
    assert series["write_iops"] == [(1.001, 2936.0)]
    assert points(series["write_lat_ms"]) == [(1.001, 0.011986), (2.0, 0.019345)]
    assert "read_iops" not in series


def test_log_series_keeps_the_final_partial_window() -> None:
    series = log_series(_logs("seq-read-8k-qd32"))
    assert series["read_iops"] == [(1.001, 28519.0)]
    assert [t for t, _ in series["read_lat_ms"]] == [1.0, 2.002, 2.002]


def test_log_series_fio2_usec_and_several_jobs() -> None:
    logs = {
        "a_iops.1.log": "1000, 100, 1, 0, 0\n2000, 110, 1, 0, 0\n",
        "a_iops.2.log": "1001, 200, 1, 0, 0\n2002, 210, 1, 0, 0\n",
        "a_lat.1.log": "1000, 400, 1, 0, 0\n",
        "a_lat.2.log": "1001, 600, 1, 0, 0\n",
        "a_bw.1.log": "1000, 9999, 1, 0, 0\n",
        "notes.txt": "ignored",
    }
    series = log_series(logs, unit="us")
    assert series == {"write_iops": [(1.0, 300.0), (2.0, 320.0)], "write_lat_ms": [(1.0, 0.5)]}


# --- real fio ---------------------------------------------------------------------------

FIO = shutil.which("fio")


@pytest.mark.integration
@pytest.mark.skipif(FIO is None, reason="fio is not installed (apt-get install fio)")
@pytest.mark.parametrize("profile", PROFILES)
def test_real_fio_accepts_every_profile(profile: str, tmp_path: Path) -> None:
    jobfile = tmp_path / "job.fio"
    jobfile.write_text(build(profile, directory=tmp_path, log_dir=tmp_path))
    done = subprocess.run(
        [str(FIO), "--parse-only", str(jobfile)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr + done.stdout


@pytest.mark.integration
@pytest.mark.skipif(FIO is None, reason="fio is not installed (apt-get install fio)")
@pytest.mark.parametrize("profile", ["randrw-4k-qd1", "wal-fsync"])
def test_real_fio_run(profile: str, tmp_path: Path) -> None:
    # The file under test on a real disk (/var/tmp, direct I/O); output and logs elsewhere.
    directory = Path(tempfile.mkdtemp(prefix="howfast-test-fio-", dir="/var/tmp"))
    try:
        jobfile, output = tmp_path / "job.fio", tmp_path / "out.json"
        logs = tmp_path / "logs"
        logs.mkdir()
        jobfile.write_text(
            build_jobfile(
                profile,
                directory=directory,
                size_bytes=16 * MIB,
                runtime_s=1,
                direct=True,
                log_dir=logs,
            )
        )
        done = subprocess.run(
            build_argv(str(FIO), jobfile, output), capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr + done.stdout
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    result = parse_output(output.read_text())
    assert [job.name for job in result.jobs] == [profile]
    metrics = result.jobs[0].metrics
    assert metrics["write_iops"] > 0
    assert metrics["write_lat_avg_ms"] > 0
    assert metrics["write_lat_p99_ms"] > 0
    if profile == "wal-fsync":
        assert metrics["sync_lat_avg_ms"] > 0
        assert commit_rate_ceiling(commit_latency_ms(metrics) or 0.0) > 0
    else:
        assert metrics["read_iops"] > 0
        assert metrics["read_lat_avg_ms"] > 0
    series = log_series({p.name: p.read_text() for p in logs.iterdir()})
    assert series["write_lat_ms"]
    assert all(value > 0 for _, value in series["write_lat_ms"])


def test_a_run_stopped_by_a_signal_says_so() -> None:
    text = (DATA / "fio-3.33_randrw-4k-qd1_sigint.stdout").read_text()
    result = parse_output(text)
    assert result.stopped_by_signal == 2 and len(result.jobs) == 1
    assert (
        parse_output((DATA / "fio-3.33_randrw-4k-qd1_json.json").read_text()).stopped_by_signal
        is None
    )


# --- figures that are not measurements (issue 26, item 6) ------------------------------


def with_value(name: str, path: tuple[str | int, ...], token: str) -> str:
    """A recorded output with the value at `path` replaced by `token` as fio would print it
    (unquoted: C's "-nan", "inf", a 2^64-1 sentinel; or a quoted string)."""
    doc = json.loads(data(name))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = "@VALUE@"
    return json.dumps(doc, indent=2).replace('"@VALUE@"', token)


NOT_MEASUREMENTS = ['"fast"', "-nan", "nan", "inf", "18446744073709551615", "-5"]
READ_FIGURES = [
    (("jobs", 1, "read", "iops"), "jobs[1].read.iops"),
    (("jobs", 1, "read", "total_ios"), "jobs[1].read.total_ios"),
    (("jobs", 1, "write", "bw_bytes"), "jobs[1].write.bw_bytes"),
    (("jobs", 1, "read", "lat_ns", "mean"), "jobs[1].read.lat_ns.mean"),
    (("jobs", 1, "write", "lat_ns", "N"), "jobs[1].write.lat_ns.N"),
    (
        ("jobs", 1, "read", "clat_ns", "percentile", "99.000000"),
        'jobs[1].read.clat_ns.percentile["99.000000"]',
    ),
    (("jobs", 1, "job_runtime"), "jobs[1].job_runtime"),
]


@pytest.mark.parametrize("token", NOT_MEASUREMENTS)
@pytest.mark.parametrize(("path", "shown"), READ_FIGURES)
def test_a_figure_howfast_keeps_must_be_a_measurement(
    path: tuple[str | int, ...], shown: str, token: str
) -> None:
    text = with_value("fio-3.33_randrw-4k-qd1_json.json", path, token)
    with pytest.raises(FigureError) as refused:
        parse_output(text)
    assert refused.value.path == shown
    said = "nan" if token == "-nan" else token  # a NaN has no sign once read
    assert str(refused.value).startswith(f"{shown} is {said}, not a figure")


@pytest.mark.parametrize(
    ("section", "shown"),
    [
        ('"fast"', 'jobs[1].read is "fast"'),
        ('{"iops": "fast"}', "jobs[1].read.total_ios is missing"),
        ('{"iops": 3000.0}', "jobs[1].read.total_ios is missing"),
    ],
)
def test_a_direction_without_its_counters_is_refused(section: str, shown: str) -> None:
    """A direction that is not fio's section, or has lost the counters that say whether it
    did I/O, was read as an unmeasured direction: a completed step of dashes, stored
    without a word (issue 35)."""
    text = with_value("fio-3.33_randrw-4k-qd1_json.json", ("jobs", 1, "read"), section)
    with pytest.raises(FigureError) as refused:
        parse_output(text)
    assert str(refused.value).startswith(f"{shown}, not a figure")


def test_a_json_plus_bin_count_must_be_a_measurement() -> None:
    doc = json.loads(data("fio-3.33_wal-fsync.json"))
    bins = doc["jobs"][1]["sync"]["lat_ns"]["bins"]
    first = next(iter(bins))
    text = with_value("fio-3.33_wal-fsync.json", ("jobs", 1, "sync", "lat_ns", "bins", first), "-1")
    with pytest.raises(FigureError, match=rf'jobs\[1\]\.sync\.lat_ns\.bins\["{first}"\] is -1'):
        parse_output(text)


def test_sentinels_in_figures_howfast_does_not_read_are_left_alone() -> None:
    """fio prints C's nan and inf where it divides by nothing, and 2^64-1 for what it never
    set: in figures howfast does not keep (a direction without I/O, min and max, the
    bandwidth's share of the group, disk utilisation) they do not make a sound output wrong."""
    name = "fio-3.33_rand-read-4k-qd64.json"
    doc = json.loads(data(name))
    tokens = {}
    for number, (path, token) in enumerate(
        [
            (("jobs", 1, "read", "bw_agg"), "-nan"),
            (("jobs", 1, "read", "iops_stddev"), "inf"),
            (("jobs", 1, "read", "lat_ns", "min"), "18446744073709551615"),
            (("jobs", 1, "write", "iops"), "-nan"),  # the job wrote nothing
            (("jobs", 1, "write", "lat_ns", "mean"), "18446744073709551615"),
            (("jobs", 1, "job options", "description"), '"nan: -nan, inf"'),
        ]
    ):
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = f"@VALUE{number}@"
        tokens[f'"@VALUE{number}@"'] = token
    text = json.dumps(doc, indent=2)
    for placeholder, token in tokens.items():
        text = text.replace(placeholder, token)
    assert "-nan" in text and "18446744073709551615" in text
    job = parse_output(text).jobs[0]
    assert job.metrics == parse_output(data(name)).jobs[0].metrics
    assert job.options["description"] == "nan: -nan, inf"  # a string, untouched
