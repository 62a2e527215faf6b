"""pg_test_fsync: PostgreSQL's own probe of the WAL sync methods. Command line and output parser.

Pure: no processes, no disks. The output format is the one of pg_test_fsync.c in PostgreSQL
10 to 17 (label column 32 wide and "%11.3f ops/sec" up to about 12, 30 wide and "%13.3f"
after), and lines of still older releases, which print "ops/sec" without "usecs/op", parse
too. A method the platform or filesystem does not support prints "n/a" (not compiled in, e.g.
fsync_writethrough on Linux) or "n/a*" (the filesystem refuses O_DIRECT, e.g. ext4 with
data=journal). The program must run with LC_ALL=C: translated output is not recognised.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import PurePath
from typing import NamedTuple

from howfast.walsync import WAL_SYNC_METHODS

# Section keys, in the order pg_test_fsync prints the sections.
ONE_WRITE = "one_write"  # "Compare file sync methods using one 8kB write"
TWO_WRITES = "two_writes"  # "... using two 8kB writes"
OPEN_SYNC_SIZES = "open_sync_sizes"  # "Compare open_sync with different write sizes"
NON_WRITE_FD = "non_write_fd"  # "Test if fsync on non-write file descriptor is honored"
NON_SYNCED = "non_synced"  # "Non-sync'ed 8kB writes"

_SECTIONS = [
    (re.compile(r"^Compare file sync methods using one\b"), ONE_WRITE),
    (re.compile(r"^Compare file sync methods using two\b"), TWO_WRITES),
    (re.compile(r"^Compare open_sync with different (write )?sizes"), OPEN_SYNC_SIZES),
    (re.compile(r"^Test if fsync on non-write file descriptor"), NON_WRITE_FD),
    (re.compile(r"^Non-sync'ed", re.IGNORECASE), NON_SYNCED),
]
_RESULT = re.compile(
    r"^\s+(?P<label>\S.*?)\s+(?P<ops>\d+(?:\.\d+)?) ops/sec"
    r"(?:\s+(?P<usecs>\d+(?:\.\d+)?) usecs/op)?\s*$"
)
_NOT_AVAILABLE = re.compile(r"^\s+(?P<label>\S.*?)\s+n/a\*?\s*$")
# " 2 *  8kB open_sync writes" -> open_sync_2x8kb
_OPEN_SYNC_SIZE = re.compile(r"^(?P<count>\d+)\s*\*\s*(?P<size>\d+)kB open_sync writes?$")


class FsyncTest(NamedTuple):
    """One line of pg_test_fsync's output."""

    section: str  # one of the section keys above
    method: str  # the label as printed: "fdatasync", "1 * 16kB open_sync write"...
    ops_per_sec: float | None  # None when not supported
    usecs_per_op: float | None  # None when not supported or not printed (old releases)
    supported: bool


def build_argv(
    path_to_binary: str | PurePath, test_file: str | PurePath, seconds: int
) -> list[str]:
    """pg_test_fsync's command line: the test file (on the storage under test; the program
    creates it and removes it when it ends) and the seconds each test runs."""
    if seconds < 1:
        raise ValueError(f"pg_test_fsync needs at least 1 second per test: {seconds}")
    return [str(path_to_binary), "-f", str(test_file), "-s", str(seconds)]


def parse(text: str) -> list[FsyncTest]:
    """Every result line of pg_test_fsync's output, in order, with the section it belongs to.

    Header and explanation lines are skipped; a line cut short (the program was interrupted
    after printing a label) is ignored. Raises ValueError when no result line is found.
    """
    tests: list[FsyncTest] = []
    section: str | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line:
            continue
        if not line[0].isspace():
            section = _section_of(line) or section
            continue
        if section is None:
            continue
        result = _RESULT.match(line)
        if result:
            usecs = result["usecs"]
            tests.append(
                FsyncTest(
                    section,
                    result["label"],
                    float(result["ops"]),
                    float(usecs) if usecs is not None else None,
                    True,
                )
            )
            continue
        not_available = _NOT_AVAILABLE.match(line)
        if not_available:
            tests.append(FsyncTest(section, not_available["label"], None, None, False))
    if not tests:
        raise ValueError("no pg_test_fsync results found in the output")
    return tests


def metrics(tests: Iterable[FsyncTest]) -> dict[str, float | str]:
    """Flatten results into metric names; unsupported methods are left out.

    - one 8kB write per sync: `{method}_ops_s`, `{method}_usecs` (e.g. fdatasync_ops_s)
    - two 8kB writes per sync: `two_writes_{method}_ops_s`, `two_writes_{method}_usecs`
    - open_sync sizes: `open_sync_{count}x{size}kb_ops_s` (e.g. open_sync_2x8kb_ops_s)
    - fsync on another descriptor: `write_fsync_close_ops_s`, `write_close_fsync_ops_s`
    - writes without sync: `nonsync_write_ops_s`, `nonsync_write_usecs`
    - the best wal_sync_method for one 8kB write: `best_wal_sync_method` (its name),
      `best_wal_sync_ops_s`, `best_wal_sync_usecs`

    `*_usecs` is the average time per operation as printed; for old releases that did not
    print it, 10^6 / ops_per_sec, which is how pg_test_fsync computes it.
    """
    result: dict[str, float | str] = {}
    best: FsyncTest | None = None
    for test in tests:
        if not test.supported or test.ops_per_sec is None:
            continue
        name = _metric_stem(test)
        if name is None:
            continue
        result[f"{name}_ops_s"] = test.ops_per_sec
        result[f"{name}_usecs"] = _usecs(test)
        is_wal_method = test.section == ONE_WRITE and test.method in WAL_SYNC_METHODS
        if is_wal_method and (best is None or test.ops_per_sec > (best.ops_per_sec or 0.0)):
            best = test
    if best is not None and best.ops_per_sec is not None:
        result["best_wal_sync_method"] = best.method
        result["best_wal_sync_ops_s"] = best.ops_per_sec
        result["best_wal_sync_usecs"] = _usecs(best)
    return result


def _section_of(line: str) -> str | None:
    for pattern, key in _SECTIONS:
        if pattern.search(line):
            return key
    return None


def _metric_stem(test: FsyncTest) -> str | None:
    label = " ".join(test.method.split())
    if test.section == ONE_WRITE:
        return _slug(label)
    if test.section == TWO_WRITES:
        return f"two_writes_{_slug(label)}"
    if test.section == OPEN_SYNC_SIZES:
        match = _OPEN_SYNC_SIZE.match(label)
        return f"open_sync_{match['count']}x{match['size']}kb" if match else None
    if test.section == NON_WRITE_FD:
        return _slug(label)  # "write, fsync, close" -> write_fsync_close
    if test.section == NON_SYNCED:
        return f"nonsync_{_slug(label)}"
    return None


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def _usecs(test: FsyncTest) -> float:
    if test.usecs_per_op is not None:
        return test.usecs_per_op
    # Supported results have run at least one operation, so ops_per_sec > 0.
    return 1e6 / (test.ops_per_sec or float("nan"))
