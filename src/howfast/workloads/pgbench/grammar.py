"""The lines pgbench prints, PostgreSQL 9.5 to 18: what each one is, and the echoed command
lines around them. Pure: patterns and small functions of one cleaned line.

Formats, by the pgbench version that prints them:
- 9.5-9.6: "latency average: X ms" without -P/-R/-L; "script statistics:" with -r or -L;
  rows "\\t%f\\t%s" under one header per file before 9.6.
- 10-13: "tps = X (including connections establishing)" and "tps = X (excluding ...)".
- 14+: "initial connection time = X ms" and "tps = X (without initial connection time)", or
  under -C "average connection time = X ms" and "tps = X (including reconnection times)";
  a "pgbench (VERSION)" line first.
- 15+: "maximum number of tries", "number of failed transactions", statement latencies with a
  failures column (and a retries column when --max-tries is not 1), ", N failed" in progress.
- init, 13+: "done in X s (drop tables X s, create tables X s, ...)."; 9.5-12: "done." without
  timings, so phases are unknown.
"""

from __future__ import annotations

import re
import shlex
from typing import Literal

Mode = Literal["tpcb-like", "select-only", "simple-update", "custom", "multiple"]
# What one cleaned line is, for splitting a text into pgbench invocations (see invocations.py)
LineRole = Literal[
    "command", "version", "vacuum", "init", "progress", "error", "aborted", "summary", "other"
]

# The builtin scripts by the description pgbench prints in "<builtin: ...>", lower-cased
_BUILTINS: dict[str, Mode] = {
    "tpc-b (sort of)": "tpcb-like",
    "select only": "select-only",
    "simple update": "simple-update",
}
# before 9.6: the bare description
_BARE_BUILTINS: dict[str, Mode] = {
    "TPC-B (sort of)": "tpcb-like",
    "SELECT only": "select-only",
    "Update only pgbench_accounts": "simple-update",
}
BUILTIN_NAMES: dict[Mode, str] = {
    "tpcb-like": "<builtin: TPC-B (sort of)>",
    "select-only": "<builtin: select only>",
    "simple-update": "<builtin: simple update>",
}
# "<builtin: select only>" as pasting leaves it: a bracket eaten by a log collector or a
# web page, the brackets HTML-escaped
_BUILTIN = re.compile(r"^(?:<|&lt;)?builtin:\s*(?P<name>[^<>&]+?)\s*(?:>|&gt;)?$", re.I)


def builtin_mode(name: str) -> Mode | None:
    """The mode of a builtin script's printed name, also when pasting ate or escaped a
    bracket ("builtin: TPC-B (sort of)>"); None for a custom script."""
    name = name.strip()
    if name in _BARE_BUILTINS:
        return _BARE_BUILTINS[name]
    m = _BUILTIN.match(name)
    return _BUILTINS.get(m["name"].lower()) if m is not None else None


def script_name(name: str) -> str:
    """A script's name as pgbench printed it: a builtin's as pgbench 9.6+ prints it when
    pasting damaged it, any other as it is."""
    m = _BUILTIN.match(name.strip())
    mode = _BUILTINS.get(m["name"].lower()) if m is not None else None
    return BUILTIN_NAMES[mode] if mode is not None else name


def mode_of(transaction_type: str) -> tuple[Mode | None, str | None]:
    """The mode of a run's "transaction type: ..." and, for a custom script, its name; no
    mode when the name is empty (a rendered web page ate "<builtin: ...>" as a tag)."""
    builtin = builtin_mode(transaction_type)
    if builtin is not None:
        return builtin, None
    if transaction_type == "multiple scripts":
        return "multiple", None
    if not transaction_type.strip():
        return None, None
    return "custom", transaction_type


# --- progress ------------------------------------------------------------------------------------

NUM = r"[-+]?(?:\d+(?:\.\d*)?|nan|inf)"
PROGRESS = re.compile(
    rf"^progress: (?P<t>{NUM}) s, (?P<tps>{NUM}) tps, lat (?P<lat>{NUM}) ms"
    rf"(?: stddev (?P<stddev>{NUM}))?(?P<rest>.*)$"
)
# what may follow "stddev X" on a progress line, in the order pgbench prints it
PROGRESS_REST = re.compile(
    rf",?\s*(?:(?P<failed>\d+) failed|lag (?P<lag>{NUM}) ms|(?P<skipped>\d+) skipped"
    r"|(?P<retried>\d+) retried|(?P<retries>\d+) retries)"
)
# a progress line that is whole, not cut by a wrap (see lines.py)
_WHOLE_PROGRESS = re.compile(
    rf"^progress: {NUM} s, {NUM} tps, lat {NUM} ms(?: stddev {NUM})?"
    rf"(?:,? ?(?:\d+ failed|lag {NUM} ms|\d+ skipped|\d+ retried|\d+ retries))*$"
)


# --- errors --------------------------------------------------------------------------------------

ERROR_PATTERNS = [
    re.compile(r"^pgbench: (?:error|fatal): "),
    re.compile(r"^connection to database \".*\" failed"),  # 10-12
    re.compile(r"^connection to server .* failed"),
    re.compile(r"^could not connect to server"),
    re.compile(r"^client \d+ aborted"),  # 10-12
    re.compile(r"^client \d+ script \d+ aborted"),  # 12
    re.compile(r"^Run was aborted"),  # 12
    re.compile(r"^(?:ERROR|FATAL|PANIC): "),  # server messages printed raw by 10-12
]
_ERROR = re.compile("|".join(p.pattern for p in ERROR_PATTERNS))
ABORTED = re.compile(
    r"Run was aborted|^(?:pgbench: (?:error|fatal): )?client \d+ (?:script \d+ )?aborted"
)


def is_error(line: str) -> bool:
    return _ERROR.match(line) is not None


# --- command line --------------------------------------------------------------------------------

# An echoed command is a line of a shell; a longer line is something else (and shlex would
# take seconds to split it).
MAX_COMMAND_CHARS = 16_384
_BARE_COMMAND = re.compile(r"""^['"]?\S*pgbench['"]?\s+['"]?-""")
_PROMPT = re.compile(r"^(?:\S*[$#>]|\+)\s+")
# options after which pgbench prints its version or its help, and runs nothing
_INFORMATIONAL = frozenset({"-V", "--version", "-?", "--help"})


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


def is_init_command(argv: list[str] | tuple[str, ...]) -> bool:
    return any(
        w in ("-i", "--initialize") or (w.startswith("-i") and not w.startswith("--")) for w in argv
    )


def runs_nothing(argv: list[str] | tuple[str, ...]) -> bool:
    """`pgbench --version`, `pgbench --help`: neither an init nor a run."""
    return any(w in _INFORMATIONAL for w in argv)


def option_value(argv: tuple[str, ...], short: str, long: str) -> str | None:
    """The value of an option given as "-R 100", "-R100", "--rate 100" or "--rate=100"."""
    for i, word in enumerate(argv):
        if word in (short, long) and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(long + "="):
            return word.split("=", 1)[1]
        if word.startswith(short) and len(word) > len(short) and not word.startswith("--"):
            return word[len(short) :]
    return None


def scale_from_command(argv: tuple[str, ...] | None) -> int | None:
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


def rate_from_command(argv: tuple[str, ...] | None) -> float | None:
    """The -R/--rate of a command (transactions per second); None when it set none."""
    value = option_value(argv or (), "-R", "--rate")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def integer(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


# --- version -------------------------------------------------------------------------------------

# "pgbench (15.18 (Debian 15.18-0+deb12u1))", "pgbench (16.2, server 15.4)",
# "pgbench (PostgreSQL) 10.23" (--version)
VERSION = re.compile(
    r"^pgbench \((?:PostgreSQL\) )?(?P<v>\d+(?:\.\d+)*(?:devel|beta\d*|rc\d*)?)(?=[ ),]|$)"
    r"(?:.*?, server (?P<server>\d+(?:\.\d+)*))?"
)


# --- run summary ---------------------------------------------------------------------------------

F = r"(-?\d+(?:\.\d+)?|-?nan|NaN)"
RUN_LINES: dict[str, re.Pattern[str]] = {
    "type": re.compile(r"^transaction type:(?: (.*))?$"),
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
        rf"^number of transactions above the {F} ms latency limit: (\d+)(?:/(\d+))?"
    ),
    # "latency average: X ms" is 9.x's form
    "lat_avg": re.compile(rf"^latency average(?: =|:) {F} ms( \(including failures\))?$"),
    "lat_stddev": re.compile(rf"^latency stddev(?: =|:) {F} ms$"),
    "lag": re.compile(rf"^rate limit schedule lag: avg {F} \(max {F}\) ms$"),
    "conn_initial": re.compile(rf"^initial connection time = {F} ms$"),
    "conn_average": re.compile(rf"^average connection time = {F} ms$"),
    "tps_including": re.compile(rf"^tps = {F} \(including connections establishing\)$"),
    "tps_excluding": re.compile(rf"^tps = {F} \(excluding connections establishing\)$"),
    "tps_without": re.compile(rf"^tps = {F} \(without initial connection[^)]*\)$"),
    "tps_reconnect": re.compile(rf"^tps = {F} \(including reconnection times\)$"),
}
# lines that belong to a run but carry nothing to keep
RUN_NOISE = re.compile(
    r"^(?:starting vacuum|end\.$|zipfian cache array overflowed|\(ignoring this error"
    r"|pgbench: (?:hint|detail|warning): |Perhaps you need to do initialization|LINE \d+: |\s*\^$)"
)

# "SQL script 1: NAME"; the name may be empty where pasting ate "<builtin: ...>" as a tag
SCRIPT_HEADER = re.compile(r"^SQL script (\d+):(?: (.*))?$")
SCRIPT_STATISTICS = "script statistics:"  # 9.6-14, one script with -r (or -L before 10)
SCRIPT_LINES: dict[str, re.Pattern[str]] = {
    "weight": re.compile(r"^ - weight(?::| =) (\d+)"),  # "weight = " in 9.6's development
    "transactions": re.compile(rf"^ - (\d+) transactions \(.*?(?:tps = {F})?\)$"),
    "failed": re.compile(r"^ - number of failed transactions: (\d+)"),
    "skipped": re.compile(r"^ - number of transactions skipped: (\d+)"),
    "lat_avg": re.compile(rf"^ - latency average = {F} ms"),
    "lat_stddev": re.compile(rf"^ - latency stddev = {F} ms"),
}
SCRIPT_NOISE = re.compile(
    r"^(?:script statistics:$| - number of (?:serialization|deadlock) failures: "
    r"| - number of transactions retried: | - total number of retries: )"
)
# "statement latencies in milliseconds:" (10-14), "... and failures:" (15+),
# "..., failures and retries:" (15+ with --max-tries other than 1); " - " with several scripts
# ", file N" with several scripts before 9.6
STATEMENT_HEADER = re.compile(
    r"^(?: - )?statement latencies in milliseconds"
    r"(?P<cols> and failures|, failures and retries)?(?:, file (?P<file>\d+))?:$"
)
# A per-statement row, read by its structure, not by its indent (pgbench indents it, pasted
# copies lose or change that): the latency as pgbench prints it ("%11.3f", "\t%f" before 9.6),
# then the failure and retry counts the header announced, then the statement. A wrapped
# fragment of a statement rarely starts so.
STATEMENT_LINE = re.compile(r"^\s*-?(?:\d+\.\d{3}|\d+\.\d{6}|nan)\s+\S")
STATEMENT_PATTERNS = [
    re.compile(rf"^\s*{F}\s+(\S.*)$"),
    re.compile(rf"^\s*{F}\s+(\d+)\s+(\S.*)$"),
    re.compile(rf"^\s*{F}\s+(\d+)\s+(\d+)\s+(\S.*)$"),
]


# --- init ----------------------------------------------------------------------------------------

# "(elapsed X s, remaining Y s)" optional: a wrap may have cut it off (its rest is a line of
# its own, ignored); the counts before it are what the init's scale is read from
TUPLES = re.compile(
    r"^(\d+) of (\d+) tuples \(\d+%\) (?:of (\w+) )?done"
    r"(?: \(elapsed [\d.]+ s, remaining [\d.]+ s\))?"
)
DONE_IN = re.compile(r"^done in ([\d.]+) s \((.*)\)\.$")
GENERATING = re.compile(r"^generating data(?: \((client|server)-side\))?\.\.\.$")
INIT_NOISE = re.compile(
    r"^(?:dropping old tables\.\.\.|creating tables\.\.\.|creating \d+ partitions\.\.\."
    r"|vacuum(?:ing)?\.\.\.|creating primary keys\.\.\.|set primary keys\.\.\."
    r"|creating foreign keys\.\.\.|set foreign keys\.\.\.|done\."
    r"|NOTICE:  table \"pgbench_\w+\" does not exist, skipping)$"
)
PHASE = re.compile(r"^(.+?) ([\d.]+) s$")
CREATING_PARTITIONS = re.compile(r"^creating (\d+) partitions\.\.\.$")
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


_INIT_LINE = re.compile("|".join(p.pattern for p in (TUPLES, DONE_IN, GENERATING, INIT_NOISE)))


def is_init_line(line: str) -> bool:
    return _INIT_LINE.match(line) is not None


def is_init_end(line: str) -> bool:
    return line == "done." or DONE_IN.match(line) is not None


# --- every line --------------------------------------------------------------------------------


def _one_pattern(patterns: list[re.Pattern[str]]) -> re.Pattern[str]:
    """The patterns as one alternation (their group names removed): one match per line instead
    of forty, which matters in a text of many megabytes."""
    return re.compile("|".join(re.sub(r"\(\?P<\w+>", "(?:", p.pattern) for p in patterns))


# every line pgbench prints on its own, but echoed commands and " - " script lines
_KNOWN_LINE = _one_pattern(
    [
        PROGRESS,
        *ERROR_PATTERNS,
        VERSION,
        *RUN_LINES.values(),
        RUN_NOISE,
        STATEMENT_HEADER,
        STATEMENT_LINE,
        SCRIPT_HEADER,
        re.compile(r"^script statistics:$"),
        TUPLES,
        DONE_IN,
        GENERATING,
        INIT_NOISE,
    ]
)
# lines pgbench prints that are whole as they are: a wrap did not cut them (anchored at
# their end, unlike a statement row or a count followed by a percentage)
_WHOLE_LINE = _one_pattern(
    [
        _WHOLE_PROGRESS,
        *(p for key, p in RUN_LINES.items() if p.pattern.endswith("$") and key != "type"),
        STATEMENT_HEADER,
        re.compile(r"^script statistics:$|^starting vacuum\.\.\.end\.$"),
        TUPLES,
        DONE_IN,
        GENERATING,
        INIT_NOISE,
    ]
)


def looks_known(line: str) -> bool:
    """Whether a line is something pgbench prints on its own (so not a wrapped continuation)."""
    return (
        _KNOWN_LINE.match(line) is not None
        or line.startswith(" - ")
        or parse_command_line(line) is not None
    )


# the lines of a script's block as pgbench prints them, " - " and all: what a " - " line that
# is not one of these (a wrapped statement's rest, "abalance - :delta ...") is not
_SCRIPT_BLOCK_LINE = _one_pattern([*SCRIPT_LINES.values(), SCRIPT_NOISE, STATEMENT_HEADER])


def is_script_block_line(line: str) -> bool:
    """Whether a line is one of a script block's: " - latency average = 2.1 ms", " - statement
    latencies in milliseconds:" ... (with its " - ")."""
    return _SCRIPT_BLOCK_LINE.match(line) is not None


def opens_script_block(line: str) -> bool:
    """Whether a line starts the per-script part of a run's summary ("script statistics:",
    "SQL script 1: ...", a statement latency header): pgbench prints no summary line after
    it, so a summary line there is a script line whose " - " pasting removed."""
    return (
        line == SCRIPT_STATISTICS
        or SCRIPT_HEADER.match(line) is not None
        or STATEMENT_HEADER.match(line) is not None
    )


def looks_whole(line: str) -> bool:
    """Whether a line is one of pgbench's, complete: "tps = 12.3 (without initial connection
    time)" is, "tps = 12.3 (without init" is not."""
    return _WHOLE_LINE.fullmatch(line) is not None  # each alternative must take the whole line


def line_role(line: str) -> tuple[LineRole, str | None]:
    """What a cleaned line is, and for a summary line which one ("tps_without", "clients",
    ...), "done" for the last line of an init: what `invocations` needs to tell where one
    pgbench invocation ends."""
    if line.startswith("progress: ") and PROGRESS.match(line):
        return "progress", None  # most lines of a long text: checked first
    if not line.strip():
        return "other", None
    if parse_command_line(line) is not None:
        return "command", None
    if VERSION.match(line):
        return "version", None
    if line.startswith("starting vacuum"):
        return "vacuum", None
    if is_init_line(line):
        return "init", ("done" if is_init_end(line) else None)
    if is_error(line):
        return ("aborted" if "Run was aborted" in line else "error"), None
    for key, pattern in RUN_LINES.items():
        if pattern.match(line):
            return "summary", key
    return "other", None
