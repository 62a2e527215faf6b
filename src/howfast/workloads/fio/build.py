"""Build fio job files and command lines from the built-in profiles. Pure: no processes, no disks.

A profile (``profiles/NAME.fio``, package data) is a readable fio job file with one job: the
I/O pattern (rw, bs, iodepth...) and a comment saying what it measures and why. The builder
wraps it into the job file that actually runs:

``[global]``
    the test file, its size, the I/O engine and direct I/O, shared by both jobs.
``[prefill]``
    writes the whole test file once, sequentially, and is not measured (the parser skips it).
``[PROFILE]``
    the measured job, started only when the prefill is done (``stonewall``), time based, with
    per-second IOPS and latency logs when the caller gives a log directory.

Why a prefill job rather than fio's own file layout: fio lays a file out only when it does not
exist or is too short, and a file that was fallocated or truncated to size by an earlier run has
holes (or unwritten extents) that read back as zeros without touching the device, so reads look
impossibly fast. Rewriting the file every time, before the measured job, makes every read hit
written data and spares every measured write the cost of allocating blocks. ``end_fsync`` makes
the prefill durable, so its write-back does not overlap the measurement. ``pre_read`` would not
help: it only warms the page cache, which direct I/O bypasses anyway.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import PurePath

PREFILL_JOB = "prefill"
TEST_FILE_NAME = "howfast-fio.dat"
DEFAULT_IOENGINE = "libaio"
LOG_AVG_MSEC = 1000  # one averaged log line per second and direction

_PROFILE_SUFFIX = ".fio"
_SECTION = re.compile(r"^\[(?P<name>[^\]]+)\]\s*$")
_MIN_SIZE = 8192  # the largest block size of the built-in profiles


@dataclass(frozen=True)
class ProfileInfo:
    """A built-in profile: its name and one line saying what it does."""

    name: str
    description: str


@dataclass(frozen=True)
class _Profile:
    name: str
    header: list[str]  # comment lines before the section, without the comment marker
    body: list[str]  # the section's lines as written (options and comments)
    options: dict[str, str]  # option -> value ("" for a bare flag such as time_based)


def _profiles_dir() -> Traversable:
    return resources.files("howfast.workloads.fio").joinpath("profiles")


def _profile_names() -> list[str]:
    return sorted(
        entry.name.removesuffix(_PROFILE_SUFFIX)
        for entry in _profiles_dir().iterdir()
        if entry.name.endswith(_PROFILE_SUFFIX)
    )


def list_profiles() -> list[ProfileInfo]:
    """The built-in profiles, by name."""
    return [ProfileInfo(name, _description(_load(name))) for name in _profile_names()]


def profile_text(name: str) -> str:
    """The profile's job file as shipped (what `howfast probe --profile` refers to)."""
    names = _profile_names()
    if name not in names:
        raise ValueError(f"unknown fio profile {name!r}; known profiles: {', '.join(names)}")
    return _profiles_dir().joinpath(name + _PROFILE_SUFFIX).read_text(encoding="utf-8")


def build_jobfile(
    profile: str,
    *,
    directory: str | PurePath,
    size_bytes: int,
    runtime_s: int,
    direct: bool = True,
    log_dir: str | PurePath | None = None,
    ioengine: str | None = None,
) -> str:
    """The complete fio job file for `profile`: what runs, and what `--dry-run` shows.

    directory: where the test file goes (on the storage under test).
    size_bytes: size of the test file; a positive multiple of 8 KiB.
    runtime_s: how long the measured job runs, in seconds.
    direct: O_DIRECT for the data-file profiles. Turn it off only where the filesystem refuses
        O_DIRECT (tmpfs); reads then come from the page cache. A profile that names its own
        `direct` (wal-fsync: buffered, like PostgreSQL's WAL) keeps it.
    log_dir: where fio writes its per-second IOPS and latency logs; never the disk under test,
        so that logging adds no I/O to what is measured. None: no logs.
    ioengine: the engine for profiles that do not name their own; None means libaio. Pass e.g.
        "psync" where libaio is not available.
    """
    prof = _load(profile)
    if size_bytes < _MIN_SIZE or size_bytes % _MIN_SIZE:
        raise ValueError(f"size_bytes must be a positive multiple of {_MIN_SIZE}: {size_bytes}")
    if runtime_s < 1:
        raise ValueError(f"runtime_s must be at least 1 second: {runtime_s}")
    test_file = fio_file_path(directory)

    lines = [f"; howfast fio job file, profile {prof.name}", ";"]
    lines += [f";{text}" if text else ";" for text in prof.header]
    lines += [
        ";",
        f"; Two jobs run one after the other: [{PREFILL_JOB}] writes the whole test file once and",
        f"; is not measured; then [{prof.name}] runs for {runtime_s} s and is measured.",
        "; Never gtod_reduce: it would turn off the latency measurements.",
        "",
        "[global]",
        f"filename={_fio_filename(test_file)}",
        f"size={size_bytes}",
        f"ioengine={ioengine or DEFAULT_IOENGINE}",
        f"direct={int(direct)}",
        "; Percentiles of the total latency (submission + completion), not only of the",
        "; completion latency: with libaio, io_submit() can do the whole I/O, leaving a",
        "; completion latency of a few microseconds for a read from the disk.",
        "lat_percentiles=1",
        "",
        f"[{PREFILL_JOB}]",
        "; Not measured. Writes every block of the file so that no measured read hits a hole",
        "; and no measured write allocates; end_fsync makes it durable before the next job.",
        "rw=write",
        f"bs={math.gcd(size_bytes, 1 << 20)}",
        "end_fsync=1",
        "",
        f"[{prof.name}]",
        "; Measured. stonewall: start only when the prefill has finished (and report apart).",
        "stonewall",
        "time_based",
        f"runtime={runtime_s}",
    ]
    lines += _measured_body(prof, direct=direct)
    if log_dir is not None:
        prefix = _option_value(str(PurePath(log_dir) / prof.name))
        lines += [
            "; Per-second averages of IOPS and latency, written outside the disk under test.",
            f"write_iops_log={prefix}",
            f"write_lat_log={prefix}",
            f"log_avg_msec={LOG_AVG_MSEC}",
        ]
    return "\n".join(lines) + "\n"


def build_argv(
    fio_path: str | PurePath, jobfile_path: str | PurePath, output_path: str | PurePath
) -> list[str]:
    """fio's command line: json+ (JSON plus the latency histogram bins) written to output_path."""
    return [str(fio_path), "--output-format=json+", f"--output={output_path}", str(jobfile_path)]


def fio_file_path(directory: str | PurePath) -> PurePath:
    """Where the job's test file goes, so that the caller can remove it afterwards."""
    return PurePath(directory) / TEST_FILE_NAME


def _measured_body(prof: _Profile, *, direct: bool) -> list[str]:
    """The profile's own lines. Its `ioengine` and `direct` win over the global ones, except
    that direct=False (the filesystem refuses O_DIRECT) must hold everywhere."""
    body = list(prof.body)
    if not direct and prof.options.get("direct", "0") != "0":
        body = [line for line in body if _option_of(line) != "direct"]
    return body


def _load(name: str) -> _Profile:
    header: list[str] = []
    body: list[str] = []
    options: dict[str, str] = {}
    section: str | None = None
    for raw in profile_text(name).splitlines():
        line = raw.rstrip()
        if section is None:
            match = _SECTION.match(line)
            if match:
                section = match["name"]
            elif line.startswith((";", "#")):
                header.append(line[1:])
            continue
        if not line:
            continue
        body.append(line)
        key = _option_of(line)
        if key:
            _, _, value = line.partition("=")
            options[key] = value.strip()
    if section != name:
        raise ValueError(f"fio profile {name}: its job must be named [{name}], not [{section}]")
    for forbidden in ("gtod_reduce", "filename", "size", "runtime", "time_based"):
        if forbidden in options:
            raise ValueError(f"fio profile {name}: {forbidden} is set by the builder")
    return _Profile(name, header, body, options)


def _option_of(line: str) -> str | None:
    stripped = line.strip()
    if not stripped or stripped.startswith((";", "#")):
        return None
    return stripped.partition("=")[0].strip()


def _description(prof: _Profile) -> str:
    for text in prof.header:
        if text.strip().startswith("What:"):
            return text.strip().removeprefix("What:").strip()
    return ""


def _option_value(value: str) -> str:
    if "\n" in value or "\r" in value:
        raise ValueError(f"a path in a fio job file cannot contain a line break: {value!r}")
    return value


def _fio_filename(path: PurePath) -> str:
    # fio splits `filename` on ':' (several files); a literal colon is written '\:'.
    return _option_value(str(path)).replace(":", "\\:")
