"""Parse pgbench's text output, PostgreSQL 10 to 17: run summaries, progress lines, init output.

Pure functions over text. The input may be stdout and stderr concatenated in any order, a copy
from a terminal (long lines wrapped), or `kubectl logs` output (with `--timestamps` or `--prefix`).
Values pgbench did not print stay None and are left out of `metrics()`.

Formats, by the pgbench version that prints them:
- 10-13: "tps = X (including connections establishing)" and "tps = X (excluding ...)".
- 14+: "initial connection time = X ms" and "tps = X (without initial connection time)", or
  under -C "average connection time = X ms" and "tps = X (including reconnection times)";
  a "pgbench (VERSION)" line first.
- 15+: "maximum number of tries", "number of failed transactions", statement latencies with a
  failures column (and a retries column when --max-tries is not 1), ", N failed" in progress.
- init, 13+: "done in X s (drop tables X s, create tables X s, ...)."; 10-12: "done." without
  timings, so phases are unknown.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Literal

from howfast.workloads.pgbench.pasted import unpaste

Mode = Literal["tpcb-like", "select-only", "simple-update", "custom", "multiple"]
Kind = Literal["run", "init"]
# What one cleaned line is, for splitting a text into pgbench invocations (see invocations.py)
LineRole = Literal[
    "command", "version", "vacuum", "init", "progress", "error", "aborted", "summary", "other"
]
StatementMetric = dict[str, str | float | int]
MetricValue = float | int | str | list[StatementMetric]
Metrics = dict[str, MetricValue]

# pgbench prints this many tuples per scale unit in pgbench_accounts
ACCOUNTS_PER_SCALE = 100_000

BUILTIN_MODES: dict[str, Mode] = {
    "<builtin: TPC-B (sort of)>": "tpcb-like",
    "TPC-B (sort of)": "tpcb-like",  # before 9.6
    "<builtin: select only>": "select-only",
    "SELECT only": "select-only",
    "<builtin: simple update>": "simple-update",
    "Update only pgbench_accounts": "simple-update",
}


@dataclass(frozen=True)
class Statement:
    """One line of a per-statement latency report (-r). `script` is pgbench's 1-based number."""

    sql: str
    latency_ms: float
    failures: int | None = None
    retries: int | None = None
    script: int = 1


@dataclass(frozen=True)
class ProgressPoint:
    """One -P line. `t` is seconds since the start, or a Unix time with --progress-timestamp.
    pgbench 10 prints "nan" latencies for an interval without transactions; they become 0.0, which
    is what later versions print."""

    t: float
    tps: float
    latency_ms: float
    stddev_ms: float | None = None
    lag_ms: float | None = None
    skipped: int | None = None
    failed: int | None = None
    retried: int | None = None
    retries: int | None = None


@dataclass(frozen=True)
class ScriptStats:
    """The per-script block printed with several scripts (or -r on pgbench 10)."""

    number: int
    name: str
    weight: int | None = None
    transactions: int | None = None
    tps: float | None = None
    failed: int | None = None
    skipped: int | None = None
    latency_avg_ms: float | None = None
    latency_stddev_ms: float | None = None


@dataclass(frozen=True)
class PgbenchRun:
    """A benchmark run's summary as pgbench printed it."""

    version: str | None = None
    server_version: str | None = None
    mode: Mode | None = None
    script: str | None = None  # the script's name when not a builtin
    scale: int | None = None
    partition_method: str | None = None
    partitions: int | None = None
    query_mode: str | None = None
    clients: int | None = None
    threads: int | None = None
    max_tries: int | None = None
    duration_s: int | None = None
    transactions_per_client: int | None = None
    transactions: int | None = None
    transactions_expected: int | None = None  # the "/N" of "actually processed" under -t
    failed: int | None = None
    serialization_failures: int | None = None
    deadlock_failures: int | None = None
    retried: int | None = None
    retries: int | None = None
    skipped: int | None = None
    late: int | None = None
    latency_limit_ms: float | None = None
    rate: float | None = None  # -R, from the echoed command: pgbench does not print it
    latency_avg_ms: float | None = None
    latency_avg_includes_failures: bool = False
    latency_stddev_ms: float | None = None
    rate_limit_lag_avg_ms: float | None = None
    rate_limit_lag_max_ms: float | None = None
    conn_time_ms: float | None = None  # "initial connection time" (14+)
    conn_avg_ms: float | None = None  # "average connection time" under -C (14+)
    tps: float | None = None  # without connection time; under -C (14+) including reconnections
    tps_including_connections: float | None = None  # 10-13
    reconnect: bool = False  # -C: tps includes reconnection times
    scripts: tuple[ScriptStats, ...] = ()
    statements: tuple[Statement, ...] = ()
    progress: tuple[ProgressPoint, ...] = ()
    command: tuple[str, ...] | None = None
    errors: tuple[str, ...] = ()
    aborted: bool = False  # pgbench said the results are incomplete, or failed before results
    notes: tuple[str, ...] = ()  # what the text did not let us read (e.g. statement rows)

    def metrics(self) -> Metrics:
        """DESIGN metric names; unknown values are left out."""
        out: Metrics = {}
        _put(out, "tps", self.tps)
        _put(out, "latency_avg_ms", self.latency_avg_ms)
        _put(out, "latency_stddev_ms", self.latency_stddev_ms)
        _put(out, "conn_time_ms", self.conn_time_ms)
        _put(out, "conn_avg_ms", self.conn_avg_ms)
        _put(out, "transactions", self.transactions)
        _put(out, "failed", self.failed)
        _put(out, "tps_including_connections", self.tps_including_connections)
        _put(out, "schedule_lag_avg_ms", self.rate_limit_lag_avg_ms)
        _put(out, "schedule_lag_max_ms", self.rate_limit_lag_max_ms)
        _put(out, "skipped", self.skipped)
        _put(out, "late", self.late)
        _put(out, "retried", self.retried)
        _put(out, "retries", self.retries)
        if self.statements:
            out["statements"] = [
                _statement_metric(s, len(self.scripts) > 1) for s in self.statements
            ]
        return out


@dataclass(frozen=True)
class PgbenchInit:
    """`pgbench -i` output. `phases` maps metric names (drop_s, generate_s, ...) to seconds; it is
    empty before pgbench 13, which printed no timings."""

    version: str | None = None
    scale: int | None = None
    generate: Literal["client", "server"] | None = None
    fillfactor: int | None = None  # -F, from the echoed command
    partitions: int | None = None
    partition_method: str | None = None
    phases: dict[str, float] = field(default_factory=dict)
    total_s: float | None = None
    completed: bool = False  # "done in ..." or "done." was printed
    command: tuple[str, ...] | None = None
    errors: tuple[str, ...] = ()

    def metrics(self) -> Metrics:
        out: Metrics = {}
        _put(out, "init_total_s", self.total_s)
        out.update(self.phases)
        _put(out, "scale", self.scale)
        return out


def _put(out: Metrics, key: str, value: float | int | None) -> None:
    if value is not None:
        out[key] = value


def _statement_metric(s: Statement, with_script: bool) -> StatementMetric:
    item: StatementMetric = {"sql": s.sql, "latency_ms": s.latency_ms}
    if s.failures is not None:
        item["failures"] = s.failures
    if s.retries is not None:
        item["retries"] = s.retries
    if with_script:
        item["script"] = s.script
    return item


# --- line cleaning -------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# kubectl logs --prefix / --timestamps
_KUBECTL_PREFIX = re.compile(r"^\[(?:pod|deployment|job)/[^\]]*\]\s?")
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)\s")


def _clean(raw: str) -> str:
    line = _ANSI.sub("", raw)
    line = _KUBECTL_PREFIX.sub("", line)
    return _TIMESTAMP.sub("", line).rstrip()


def clean_lines(text: str) -> list[str]:
    """Lines without colours, kubectl prefixes and trailing whitespace, with hard-wrapped lines
    joined back, as pgbench printed them though pasted into a document (fenced, quoted or
    indented: see `pasted`) or with its own indentation lost. A carriage return (pgbench's
    progress overwrite on a terminal) ends a line."""
    return [_reindent(_clean(raw)) for raw in _unwrap(unpaste(text.splitlines()))]


def _reindent(line: str) -> str:
    """A line of pgbench's at the indent pgbench gives it, whatever indent it came with: none
    for summary lines, " - " for the lines of a script block. Per-statement rows are read by
    their columns, whatever their indent; other lines are left alone."""
    stripped = line.lstrip()
    if stripped == line or _STATEMENT_LINE.match(line):
        return line
    if stripped.startswith("- "):
        return " - " + stripped[2:]
    return stripped if _looks_known(stripped) else line


def _unwrap(raw_lines: list[str]) -> list[str]:
    """Undo a hard wrap at a fixed width (a terminal or log viewer copy): when several lines
    are exactly as long as the longest one, such a line followed by one that pgbench would not
    print on its own is joined with it, exactly (the wrap split at a column, not at a word)."""
    width = max((len(line) for line in raw_lines), default=0)
    if width < 40 or sum(len(line) == width for line in raw_lines) < 2:
        return raw_lines
    # Pieces are gathered and joined once: appending each to a growing string copies it
    # again every time, which is quadratic in a text of many wrapped lines.
    joined: list[list[str]] = []
    last_piece = ""
    for raw in raw_lines:
        if joined and len(last_piece) == width and raw and not _looks_own(_clean(raw)):
            joined[-1].append(raw)
        else:
            joined.append([raw])
        last_piece = raw
    return ["".join(pieces) for pieces in joined]


def _looks_own(line: str) -> bool:
    """Whether a line is one pgbench prints on its own, at whatever indent."""
    stripped = line.lstrip()
    return _looks_known(line) or (stripped != line and _looks_known(stripped))


# --- progress ------------------------------------------------------------------------------------

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|nan|inf)"
_PROGRESS = re.compile(
    rf"^progress: (?P<t>{_NUM}) s, (?P<tps>{_NUM}) tps, lat (?P<lat>{_NUM}) ms"
    rf"(?: stddev (?P<stddev>{_NUM}))?(?P<rest>.*)$"
)
_PROGRESS_PARTS = {
    "failed": re.compile(r",\s*(\d+) failed"),
    "lag": re.compile(rf",\s*lag ({_NUM}) ms"),
    "skipped": re.compile(r",\s*(\d+) skipped"),
    "retried": re.compile(r",\s*(\d+) retried"),
    "retries": re.compile(r",?\s*(\d+) retries"),
}


def _float(text: str) -> float:
    """A printed number; NaN (pgbench 10 on an empty interval) becomes 0.0."""
    value = float(text)
    return 0.0 if math.isnan(value) else value


def parse_progress_line(line: str) -> ProgressPoint | None:
    """Parse one `-P` line ("progress: 1.0 s, 1234.5 tps, lat 0.812 ms stddev 0.123, ...");
    None for any other line. Meant for live use on each stderr line."""
    first = line.splitlines()[0] if line.strip() else ""  # "\r" ends a line, as in clean_lines
    return _progress_point(_clean(first).lstrip())


def _progress_point(line: str) -> ProgressPoint | None:
    """`parse_progress_line` of a line already cleaned."""
    m = _PROGRESS.match(line)
    if m is None:
        return None
    rest = m["rest"]

    def part(name: str) -> str | None:
        found = _PROGRESS_PARTS[name].search(rest)
        return found.group(1) if found else None

    def int_part(name: str) -> int | None:
        value = part(name)
        return int(value) if value is not None else None

    lag = part("lag")
    return ProgressPoint(
        t=_float(m["t"]),
        tps=_float(m["tps"]),
        latency_ms=_float(m["lat"]),
        stddev_ms=_float(m["stddev"]) if m["stddev"] is not None else None,
        lag_ms=_float(lag) if lag is not None else None,
        skipped=int_part("skipped"),
        failed=int_part("failed"),
        retried=int_part("retried"),
        retries=int_part("retries"),
    )


# --- errors --------------------------------------------------------------------------------------

_ERROR_PATTERNS = [
    re.compile(r"^pgbench: (?:error|fatal): "),
    re.compile(r"^connection to database \".*\" failed"),  # 10-12
    re.compile(r"^connection to server .* failed"),
    re.compile(r"^could not connect to server"),
    re.compile(r"^client \d+ aborted"),  # 10-12
    re.compile(r"^client \d+ script \d+ aborted"),  # 12
    re.compile(r"^Run was aborted"),  # 12
    re.compile(r"^(?:ERROR|FATAL|PANIC): "),  # server messages printed raw by 10-12
]
_ABORTED = re.compile(
    r"Run was aborted|^(?:pgbench: (?:error|fatal): )?client \d+ (?:script \d+ )?aborted"
)


def _is_error(line: str) -> bool:
    return any(p.match(line) for p in _ERROR_PATTERNS)


# --- command line --------------------------------------------------------------------------------

# An echoed command is a line of a shell; a longer line is something else (and shlex would
# take seconds to split it).
MAX_COMMAND_CHARS = 16_384
_BARE_COMMAND = re.compile(r"""^['"]?\S*pgbench['"]?\s+['"]?-""")
_PROMPT = re.compile(r"^(?:\S*[$#>]|\+)\s+")


def parse_command_line(line: str) -> list[str] | None:
    """The argv of an echoed pgbench command ("pgbench -c 4 db", "$ pgbench ...", "+ pgbench ..."
    from `set -x`, "kubectl exec pod -- pgbench ..."), from the pgbench word on; None otherwise.
    pgbench's own lines ("pgbench (15.4)", "pgbench: error: ...") are not commands."""
    if "pgbench" not in line or len(line) > MAX_COMMAND_CHARS:
        return None
    prompted = _PROMPT.match(line) is not None
    if not prompted and _BARE_COMMAND.match(line) is None:
        return None  # spares shlex every line that merely mentions pgbench
    body = _PROMPT.sub("", line, count=1)
    try:
        words = shlex.split(body)
    except ValueError:
        return None
    for i, word in enumerate(words):
        if word.rsplit("/", 1)[-1] != "pgbench":
            continue
        rest = words[i + 1 :]
        if rest and rest[0].startswith("("):
            return None  # the version line
        if not prompted and (i > 0 or not (rest and rest[0].startswith("-"))):
            return None  # without a prompt, only a line that starts "pgbench -..." is a command
        return words[i:]
    return None


def _scale_from_command(argv: tuple[str, ...] | None) -> int | None:
    if not argv:
        return None
    for i, word in enumerate(argv):
        value: str | None = None
        if word in ("-s", "--scale") and i + 1 < len(argv):
            value = argv[i + 1]
        elif word.startswith("--scale="):
            value = word.split("=", 1)[1]
        elif word.startswith("-s") and len(word) > 2 and word[2:].isdigit():
            value = word[2:]
        if value is not None and value.isdigit():
            return int(value)
    return None


def _rate_from_command(argv: tuple[str, ...] | None) -> float | None:
    """The -R/--rate of a command (transactions per second); None when it set none."""
    value = _option_value(argv or (), "-R", "--rate")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _option_value(argv: tuple[str, ...], short: str, long: str) -> str | None:
    """The value of an option given as "-R 100", "-R100", "--rate 100" or "--rate=100"."""
    for i, word in enumerate(argv):
        if word in (short, long) and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(long + "="):
            return word.split("=", 1)[1]
        if word.startswith(short) and len(word) > len(short) and not word.startswith("--"):
            return word[len(short) :]
    return None


def _integer(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _is_init_command(argv: list[str]) -> bool:
    return any(
        w in ("-i", "--initialize") or (w.startswith("-i") and not w.startswith("--")) for w in argv
    )


# --- version -------------------------------------------------------------------------------------

# "pgbench (15.18 (Debian 15.18-0+deb12u1))", "pgbench (16.2, server 15.4)",
# "pgbench (PostgreSQL) 10.23" (--version)
_VERSION = re.compile(
    r"^pgbench \((?:PostgreSQL\) )?(?P<v>\d+(?:\.\d+)*(?:devel|beta\d*|rc\d*)?)(?=[ ),]|$)"
    r"(?:.*?, server (?P<server>\d+(?:\.\d+)*))?"
)


# --- run summary ---------------------------------------------------------------------------------

_F = r"(-?\d+(?:\.\d+)?|-?nan|NaN)"
_RUN_LINES: dict[str, re.Pattern[str]] = {
    "type": re.compile(r"^transaction type: (.+)$"),
    "scale": re.compile(r"^scaling factor: (\d+)$"),
    "partition_method": re.compile(r"^partition method: (\w+)$"),
    "partitions": re.compile(r"^partitions: (\d+)$"),
    "query_mode": re.compile(r"^query mode: (\w+)$"),
    "clients": re.compile(r"^number of clients: (\d+)$"),
    "threads": re.compile(r"^number of threads: (\d+)$"),
    "max_tries": re.compile(r"^maximum number of tries: (\d+)$"),
    "duration": re.compile(r"^duration: (\d+) s$"),
    "per_client": re.compile(r"^number of transactions per client: (\d+)$"),
    "processed": re.compile(r"^number of transactions actually processed: (\d+)(?:/(\d+))?$"),
    "failed": re.compile(r"^number of failed transactions: (\d+)"),
    "serialization": re.compile(r"^number of serialization failures: (\d+)"),
    "deadlock": re.compile(r"^number of deadlock failures: (\d+)"),
    "retried": re.compile(r"^number of transactions retried: (\d+)"),
    "retries": re.compile(r"^total number of retries: (\d+)"),
    "skipped": re.compile(r"^number of transactions skipped: (\d+)"),
    "late": re.compile(
        rf"^number of transactions above the {_F} ms latency limit: (\d+)(?:/(\d+))?"
    ),
    # "latency average: X ms" is 9.x's form
    "lat_avg": re.compile(rf"^latency average(?: =|:) {_F} ms( \(including failures\))?$"),
    "lat_stddev": re.compile(rf"^latency stddev(?: =|:) {_F} ms$"),
    "lag": re.compile(rf"^rate limit schedule lag: avg {_F} \(max {_F}\) ms$"),
    "conn_initial": re.compile(rf"^initial connection time = {_F} ms$"),
    "conn_average": re.compile(rf"^average connection time = {_F} ms$"),
    "tps_including": re.compile(rf"^tps = {_F} \(including connections establishing\)$"),
    "tps_excluding": re.compile(rf"^tps = {_F} \(excluding connections establishing\)$"),
    "tps_without": re.compile(rf"^tps = {_F} \(without initial connection[^)]*\)$"),
    "tps_reconnect": re.compile(rf"^tps = {_F} \(including reconnection times\)$"),
}
# lines that belong to a run but carry nothing to keep
_RUN_NOISE = re.compile(
    r"^(?:starting vacuum|end\.$|zipfian cache array overflowed|\(ignoring this error"
    r"|pgbench: (?:hint|detail|warning): |Perhaps you need to do initialization|LINE \d+: |\s*\^$)"
)

_SCRIPT_HEADER = re.compile(r"^SQL script (\d+): (.+)$")
_SCRIPT_LINES: dict[str, re.Pattern[str]] = {
    "weight": re.compile(r"^ - weight: (\d+)"),
    "transactions": re.compile(rf"^ - (\d+) transactions \(.*tps = {_F}\)$"),
    "failed": re.compile(r"^ - number of failed transactions: (\d+)"),
    "skipped": re.compile(r"^ - number of transactions skipped: (\d+)"),
    "lat_avg": re.compile(rf"^ - latency average = {_F} ms"),
    "lat_stddev": re.compile(rf"^ - latency stddev = {_F} ms"),
}
_SCRIPT_NOISE = re.compile(
    r"^(?:script statistics:$| - number of (?:serialization|deadlock) failures: "
    r"| - number of transactions retried: | - total number of retries: )"
)
# "statement latencies in milliseconds:" (10-14), "... and failures:" (15+),
# "..., failures and retries:" (15+ with --max-tries other than 1); " - " with several scripts
# ", file N" with several scripts before 9.6
_STATEMENT_HEADER = re.compile(
    r"^(?: - )?statement latencies in milliseconds"
    r"(?P<cols> and failures|, failures and retries)?(?:, file (?P<file>\d+))?:$"
)
# A per-statement row, read by its structure, not by its indent (pgbench indents it, pasted
# copies lose or change that): the latency as pgbench prints it ("%11.3f", "\t%f" before 9.6),
# then the failure and retry counts the header announced, then the statement. A wrapped
# fragment of a statement rarely starts so.
_STATEMENT_LINE = re.compile(r"^\s*-?(?:\d+\.\d{3}|\d+\.\d{6}|nan)\s+\S")
_STATEMENT_PATTERNS = [
    re.compile(rf"^\s*{_F}\s+(\S.*)$"),
    re.compile(rf"^\s*{_F}\s+(\d+)\s+(\S.*)$"),
    re.compile(rf"^\s*{_F}\s+(\d+)\s+(\d+)\s+(\S.*)$"),
]


def _mode_of(transaction_type: str) -> tuple[Mode, str | None]:
    if transaction_type in BUILTIN_MODES:
        return BUILTIN_MODES[transaction_type], None
    if transaction_type == "multiple scripts":
        return "multiple", None
    return "custom", transaction_type


@dataclass
class _ScriptAcc:
    number: int
    name: str | None = None
    values: dict[str, tuple[str | None, ...]] = field(default_factory=dict)


@dataclass
class _StatementAcc:
    sql: str
    latency_ms: float
    failures: int | None
    retries: int | None
    script: int


class _RunBuilder:
    """Accumulates a run line by line; a small state machine for the script and statement blocks."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[str | None, ...]] = {}
        self.version: str | None = None
        self.server_version: str | None = None
        self.scripts: list[_ScriptAcc] = []
        self.statements: list[_StatementAcc] = []
        self.progress: list[ProgressPoint] = []
        self.progress_raw = ""
        self.errors: list[str] = []
        self.statement_columns: int | None = None  # None: not inside a statement block
        self.unreadable_statement: str | None = None  # the first row that could not be read
        self.last: Literal["statement", "progress", "other"] = "other"

    def feed(self, line: str) -> None:
        if not line.strip():
            self.statement_columns = None
            self.last = "other"
            return
        if self._statement_row(line) or self._continuation(line):
            return
        self.last = "other"
        point = _progress_point(line)
        if point is not None:
            self.progress.append(point)
            self.progress_raw = line
            self.last = "progress"
            return
        if self._statement(line) or self._script_line(line):
            return
        self.statement_columns = None
        if _is_error(line):
            self.errors.append(line.strip())
            return
        version = _VERSION.match(line)
        if version is not None:
            self.version = self.version or version["v"]
            self.server_version = self.server_version or version["server"]
            return
        for key, pattern in _RUN_LINES.items():
            m = pattern.match(line)
            if m is not None:
                self.values[key] = m.groups()
                return

    def _continuation(self, line: str) -> bool:
        """A terminal wrapped a long statement or progress line: join it back exactly (a hard
        wrap splits at a column, not between words). Inside a statement block, a line that is
        neither a row nor a statement's continuation makes the block unreadable."""
        if self.last == "statement" and not _looks_known(line):
            self.statements[-1].sql += line
            return True
        if self.statement_columns is not None and not _looks_known(line):
            self.unreadable_statement = self.unreadable_statement or line.strip()
            return True
        if self.last == "progress" and not _looks_known(line):
            joined = self.progress_raw + line
            point = _progress_point(joined)
            if point is not None:
                self.progress[-1] = point
                self.progress_raw = joined
            return True
        return False

    def _statement(self, line: str) -> bool:
        header = _STATEMENT_HEADER.match(line)
        if header is None:
            return False
        cols = header["cols"]
        self.statement_columns = 0 if cols is None else (2 if "retries" in cols else 1)
        if header["file"] is not None:  # before 9.6: one header per script, no script block
            self.scripts.append(_ScriptAcc(number=int(header["file"])))
        elif not self.scripts:
            self.scripts.append(_ScriptAcc(number=1))
        return True

    def _statement_row(self, line: str) -> bool:
        """A row of the statement block being read, by its columns; a line that starts like a
        row but lacks the columns its header announced is unreadable (and consumed)."""
        if self.statement_columns is None:
            return False
        m = _STATEMENT_PATTERNS[self.statement_columns].match(line)
        if m is None:
            if _STATEMENT_LINE.match(line) is None:
                return False
            self.unreadable_statement = self.unreadable_statement or line.strip()
            self.last = "other"
            return True
        groups = m.groups()
        self.statements.append(
            _StatementAcc(
                sql=groups[-1],
                latency_ms=_float(groups[0]),
                failures=int(groups[1]) if self.statement_columns >= 1 else None,
                retries=int(groups[2]) if self.statement_columns == 2 else None,
                script=self.scripts[-1].number if self.scripts else 1,
            )
        )
        self.last = "statement"
        return True

    def _script_line(self, line: str) -> bool:
        header = _SCRIPT_HEADER.match(line)
        if header is not None:
            self.scripts.append(_ScriptAcc(number=int(header[1]), name=header[2]))
            self.statement_columns = None
            return True
        if line == "script statistics:":  # pgbench 10 with -r and one script
            self.scripts.append(_ScriptAcc(number=1))
            return True
        if not self.scripts:
            return False
        for key, pattern in _SCRIPT_LINES.items():
            m = pattern.match(line)
            if m is not None:
                self.scripts[-1].values[key] = m.groups()
                self.statement_columns = None
                return True
        return _SCRIPT_NOISE.match(line) is not None

    def build(self, command: tuple[str, ...] | None) -> PgbenchRun:
        get = _Getter(self.values)
        mode: Mode | None = None
        script: str | None = None
        transaction_type = get.text("type")
        if transaction_type is not None:
            mode, script = _mode_of(transaction_type)
        tps_reconnect = get.real("tps_reconnect")
        tps = get.real("tps_without")
        if tps is None:
            tps = get.real("tps_excluding")
        if tps is None:
            tps = tps_reconnect
        client_aborted = any(_ABORTED.search(e) for e in self.errors)
        return PgbenchRun(
            version=self.version,
            server_version=self.server_version,
            mode=mode,
            script=script,
            scale=get.integer("scale"),
            partition_method=get.text("partition_method"),
            partitions=get.integer("partitions"),
            query_mode=get.text("query_mode"),
            clients=get.integer("clients"),
            threads=get.integer("threads"),
            max_tries=get.integer("max_tries"),
            duration_s=get.integer("duration"),
            transactions_per_client=get.integer("per_client"),
            transactions=get.integer("processed"),
            transactions_expected=get.integer("processed", 1),
            failed=get.integer("failed"),
            serialization_failures=get.integer("serialization"),
            deadlock_failures=get.integer("deadlock"),
            retried=get.integer("retried"),
            retries=get.integer("retries"),
            skipped=get.integer("skipped"),
            late=get.integer("late", 1),
            latency_limit_ms=get.real("late"),
            rate=_rate_from_command(command),
            latency_avg_ms=get.real("lat_avg"),
            latency_avg_includes_failures=get.text("lat_avg", 1) is not None,
            latency_stddev_ms=get.real("lat_stddev"),
            rate_limit_lag_avg_ms=get.real("lag"),
            rate_limit_lag_max_ms=get.real("lag", 1),
            conn_time_ms=get.real("conn_initial"),
            conn_avg_ms=get.real("conn_average"),
            tps=tps,
            tps_including_connections=get.real("tps_including"),
            reconnect=tps_reconnect is not None,
            scripts=tuple(_script_stats(s) for s in self.scripts if s.name is not None),
            statements=()
            if self.unreadable_statement is not None
            else tuple(
                Statement(s.sql, s.latency_ms, s.failures, s.retries, s.script)
                for s in self.statements
            ),
            progress=tuple(self.progress),
            command=command,
            errors=tuple(self.errors),
            aborted=client_aborted or (bool(self.errors) and tps is None),
            notes=self._notes(),
        )

    def _notes(self) -> tuple[str, ...]:
        if self.unreadable_statement is None:
            return ()
        return (
            "per-statement latencies could not be read (their columns are not the ones the "
            f"header announces: {self.unreadable_statement[:80]!r}); none are stored",
        )


class _Getter:
    """Typed access to the regex groups collected per line kind."""

    def __init__(self, values: dict[str, tuple[str | None, ...]]) -> None:
        self.values = values

    def text(self, key: str, n: int = 0) -> str | None:
        groups = self.values.get(key)
        return groups[n] if groups is not None and len(groups) > n else None

    def integer(self, key: str, n: int = 0) -> int | None:
        text = self.text(key, n)
        return int(text) if text is not None else None

    def real(self, key: str, n: int = 0) -> float | None:
        text = self.text(key, n)
        return _float(text) if text is not None else None


def _script_stats(acc: _ScriptAcc) -> ScriptStats:
    get = _Getter(acc.values)
    return ScriptStats(
        number=acc.number,
        name=acc.name or "",
        weight=get.integer("weight"),
        transactions=get.integer("transactions"),
        tps=get.real("transactions", 1),
        failed=get.integer("failed"),
        skipped=get.integer("skipped"),
        latency_avg_ms=get.real("lat_avg"),
        latency_stddev_ms=get.real("lat_stddev"),
    )


def _looks_known(line: str) -> bool:
    """Whether a line is something pgbench prints on its own (so not a wrapped continuation)."""
    return (
        _KNOWN_LINE.match(line) is not None
        or line.startswith(" - ")
        or parse_command_line(line) is not None
    )


# --- init ----------------------------------------------------------------------------------------

_TUPLES = re.compile(
    r"^(\d+) of (\d+) tuples \(\d+%\) (?:of (\w+) )?done \(elapsed [\d.]+ s, remaining [\d.]+ s\)"
)
_DONE_IN = re.compile(r"^done in ([\d.]+) s \((.*)\)\.$")
_GENERATING = re.compile(r"^generating data(?: \((client|server)-side\))?\.\.\.$")
_INIT_NOISE = re.compile(
    r"^(?:dropping old tables\.\.\.|creating tables\.\.\.|creating \d+ partitions\.\.\."
    r"|vacuum(?:ing)?\.\.\.|creating primary keys\.\.\.|set primary keys\.\.\."
    r"|creating foreign keys\.\.\.|set foreign keys\.\.\.|done\."
    r"|NOTICE:  table \"pgbench_\w+\" does not exist, skipping)$"
)
_PHASE = re.compile(r"^(.+?) ([\d.]+) s$")
_CREATING_PARTITIONS = re.compile(r"^creating (\d+) partitions\.\.\.$")
_PHASE_KEYS = {
    "drop tables": "drop_s",
    "create tables": "create_s",
    "client-side generate": "generate_s",
    "server-side generate": "generate_s",
    "vacuum": "vacuum_s",
    "primary keys": "primary_keys_s",
    "foreign keys": "foreign_keys_s",
}


def phase_key(name: str) -> str:
    """The metric key of an init phase as pgbench names it in "done in ... (NAME X s, ...)"."""
    if name in _PHASE_KEYS:
        return _PHASE_KEYS[name]
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") + "_s"


def _is_init_line(line: str) -> bool:
    return (
        _TUPLES.match(line) is not None
        or _DONE_IN.match(line) is not None
        or _GENERATING.match(line) is not None
        or _INIT_NOISE.match(line) is not None
    )


def _one_pattern(patterns: list[re.Pattern[str]]) -> re.Pattern[str]:
    """The patterns as one alternation (their group names removed): one match per line instead
    of forty, which matters in a text of many megabytes."""
    return re.compile("|".join(re.sub(r"\(\?P<\w+>", "(?:", p.pattern) for p in patterns))


# every line pgbench prints on its own, but echoed commands and " - " script lines
_KNOWN_LINE = _one_pattern(
    [
        _PROGRESS,
        *_ERROR_PATTERNS,
        _VERSION,
        *_RUN_LINES.values(),
        _RUN_NOISE,
        _STATEMENT_HEADER,
        _STATEMENT_LINE,
        _SCRIPT_HEADER,
        _TUPLES,
        _DONE_IN,
        _GENERATING,
        _INIT_NOISE,
    ]
)


def _build_init(lines: list[str], command: tuple[str, ...] | None) -> PgbenchInit:
    scale: int | None = None
    generate: Literal["client", "server"] | None = None
    phases: dict[str, float] = {}
    total: float | None = None
    completed = False
    version: str | None = None
    created_partitions: int | None = None
    errors: list[str] = []
    for line in lines:
        if (m := _CREATING_PARTITIONS.match(line)) is not None:
            created_partitions = int(m[1])
        if (m := _TUPLES.match(line)) is not None:
            table = m[3]
            if table in (None, "pgbench_accounts"):
                scale = int(m[2]) // ACCOUNTS_PER_SCALE
            generate = generate or "client"
        elif (m := _GENERATING.match(line)) is not None:
            generate = "server" if m[1] == "server" else "client"
        elif (m := _DONE_IN.match(line)) is not None:
            total = float(m[1])
            completed = True
            for part in m[2].split(", "):
                if (p := _PHASE.match(part.strip())) is not None:
                    phases[phase_key(p[1])] = float(p[2])
                    if p[1] == "server-side generate":
                        generate = "server"
                    elif p[1] == "client-side generate":
                        generate = "client"
        elif line == "done.":
            completed = True
        elif _is_error(line):
            errors.append(line.strip())
        elif (v := _VERSION.match(line)) is not None:
            version = version or v["v"]
    if scale is None:
        scale = _scale_from_command(command)
    argv = command or ()
    steps = _option_value(argv, "-I", "--init-steps") or ""
    if generate is None and ("G" in steps or "g" in steps):  # -I dtGvp: server-side
        generate = "server" if "G" in steps else "client"
    partitions = _integer(_option_value(argv, "--partitions", "--partitions"))
    partitions = partitions if partitions is not None else created_partitions
    method = _option_value(argv, "--partition-method", "--partition-method")
    return PgbenchInit(
        version=version,
        scale=scale,
        generate=generate,
        fillfactor=_integer(_option_value(argv, "-F", "--fillfactor")),
        partitions=partitions,
        partition_method=method or ("range" if partitions else None),
        phases=phases,
        total_s=total,
        completed=completed,
        command=command,
        errors=tuple(errors),
    )


# --- entry points --------------------------------------------------------------------------------


def _split(lines: list[str]) -> tuple[list[str], list[str], list[list[str]]]:
    """Init lines, run lines and echoed commands. Lines are classified by what they say, so stdout
    and stderr may come in any order; error lines go to the init when they come after its first
    line and before its end ("done ...") or the first line of a run."""
    init: list[str] = []
    run: list[str] = []
    commands: list[list[str]] = []
    init_open = False
    for line in lines:
        argv = parse_command_line(line)
        if argv is not None:
            commands.append(argv)
            init_open = _is_init_command(argv)
            continue
        if _is_init_line(line):
            init.append(line)
            init_open = not (line == "done." or _DONE_IN.match(line))
            continue
        if init_open and _is_error(line):
            init.append(line)
            continue
        if line.strip():
            init_open = False
        run.append(line)
    return init, run, commands


def _has_run_data(lines: list[str]) -> bool:
    """Whether lines hold anything only a benchmark run prints (pgbench 14+ prints its version
    first in a run, never in an init)."""
    return any(
        _PROGRESS.match(line)
        or (_VERSION.match(line) and not line.startswith("pgbench (PostgreSQL)"))
        or any(p.match(line) for p in _RUN_LINES.values())
        for line in lines
    )


def detect_kind(text: str) -> Kind | None:
    """What an output is: "run" when it has anything of a benchmark run (an output holding an init
    and then a run is a "run": split it with `parse_any`), "init" for `pgbench -i` output alone,
    else None."""
    init, run, commands = _split(clean_lines(text))
    if _has_run_data(run) or any(not _is_init_command(c) for c in commands):
        return "run"
    if init or any(_is_init_command(c) for c in commands):
        return "init"
    return None


def parse_run(text: str) -> PgbenchRun:
    """Parse a benchmark run's output; init lines in it are ignored."""
    _, run_lines, commands = _split(clean_lines(text))
    builder = _RunBuilder()
    for line in run_lines:
        builder.feed(line)
    command = next((tuple(c) for c in commands if not _is_init_command(c)), None)
    return builder.build(command)


def parse_init(text: str) -> PgbenchInit:
    """Parse `pgbench -i` output (errors anywhere in the text count as the init's when the text
    holds no run)."""
    lines = clean_lines(text)
    init_lines, run_lines, commands = _split(lines)
    if not _has_run_data(run_lines):
        init_lines = [line for line in lines if _is_init_line(line) or _is_error(line)]
        init_lines += [line for line in run_lines if _VERSION.match(line)]
    command = next((tuple(c) for c in commands if _is_init_command(c)), None)
    return _build_init(init_lines, command)


def parse_any(text: str) -> tuple[PgbenchInit | None, PgbenchRun | None]:
    """Split an output that may hold an init, a run, or both, and parse each part."""
    return parse_lines(clean_lines(text))


def parse_lines(lines: list[str]) -> tuple[PgbenchInit | None, PgbenchRun | None]:
    """`parse_any` of lines already cleaned by `clean_lines`."""
    init_lines, run_lines, commands = _split(lines)
    init_command = next((tuple(c) for c in commands if _is_init_command(c)), None)
    run_command = next((tuple(c) for c in commands if not _is_init_command(c)), None)
    has_run = _has_run_data(run_lines) or run_command is not None
    init: PgbenchInit | None = None
    if init_lines or init_command is not None:
        if not has_run:  # errors belong to the init when there is nothing else
            init_lines = [line for line in lines if _is_init_line(line) or _is_error(line)]
        init = _build_init(init_lines, init_command)
    run: PgbenchRun | None = None
    if has_run or (init is None and any(_is_error(line) for line in run_lines)):
        builder = _RunBuilder()
        for line in run_lines:
            builder.feed(line)
        run = builder.build(run_command)
    return init, run


def line_role(line: str) -> tuple[LineRole, str | None]:
    """What a cleaned line is, and for a summary line which one ("tps_without", "clients",
    ...), "done" for the last line of an init: what `invocations` needs to tell where one
    pgbench invocation ends."""
    if not line.strip():
        return "other", None
    if parse_command_line(line) is not None:
        return "command", None
    if _VERSION.match(line):
        return "version", None
    if line.startswith("starting vacuum"):
        return "vacuum", None
    if _is_init_line(line):
        return "init", ("done" if line == "done." or _DONE_IN.match(line) else None)
    if _PROGRESS.match(line):
        return "progress", None
    if _is_error(line):
        return ("aborted" if "Run was aborted" in line else "error"), None
    for key, pattern in _RUN_LINES.items():
        if pattern.match(line):
            return "summary", key
    return "other", None
