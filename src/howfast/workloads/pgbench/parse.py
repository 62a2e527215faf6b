"""Parse pgbench's text output, PostgreSQL 9.5 to 18: run summaries, progress lines, init output.

The input may be stdout and stderr concatenated in any order, a copy from a terminal, a
document or a log viewer (lines.py undoes what those do). Values pgbench did not print stay
None and are left out of `metrics()`. The formats of each version: grammar.py.

`PartParser` reads one invocation's lines one at a time (invocations.py cuts a text into
invocations, and a long text is never held whole); `parse_run`, `parse_init`, `parse_any`
and `parse_lines` read a text or lines held in memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from howfast.workloads.pgbench import grammar as g
from howfast.workloads.pgbench.grammar import Mode, parse_command_line, phase_key
from howfast.workloads.pgbench.lines import clean, clean_lines
from howfast.workloads.pgbench.progress import (
    ProgressPoint,
    ProgressSeries,
    number,
    progress_point,
)

__all__ = [  # what other modules and the tests import from here
    "ACCOUNTS_PER_SCALE",
    "PartParser",
    "PgbenchInit",
    "PgbenchRun",
    "ProgressPoint",
    "ScriptStats",
    "Statement",
    "clean_lines",
    "detect_kind",
    "parse_any",
    "parse_command_line",
    "parse_init",
    "parse_lines",
    "parse_progress_line",
    "parse_run",
    "phase_key",
]

Kind = Literal["run", "init"]
StatementMetric = dict[str, str | float | int]
MetricValue = float | int | str | list[StatementMetric]
Metrics = dict[str, MetricValue]

# pgbench prints this many tuples per scale unit in pgbench_accounts
ACCOUNTS_PER_SCALE = 100_000
# More characters than this after a row are no wrapped statement's rest: they are not held
MAX_WRAPPED_CHARS = 16_384


@dataclass(frozen=True)
class Statement:
    """One line of a per-statement latency report (-r). `script` is pgbench's 1-based number."""

    sql: str
    latency_ms: float
    failures: int | None = None
    retries: int | None = None
    script: int = 1


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
    progress: Sequence[ProgressPoint] = ()  # a ProgressSeries when parsed from text
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


# --- progress ---------------------------------------------------------------------------------


def parse_progress_line(line: str) -> ProgressPoint | None:
    """Parse one `-P` line ("progress: 1.0 s, 1234.5 tps, lat 0.812 ms stddev 0.123, ...");
    None for any other line. Meant for live use on each stderr line."""
    first = line.splitlines()[0] if line.strip() else ""  # "\r" ends a line, as in clean_lines
    return progress_point(clean(first).lstrip())


# --- run --------------------------------------------------------------------------------------


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
        self.progress = ProgressSeries()
        self.progress_raw = ""
        self.errors: list[str] = []
        self.statement_columns: int | None = None  # None: not inside a statement block
        self.unreadable_statement: str | None = None  # the first row that could not be read
        # lines after a row that pgbench did not print: its statement's rest, wrapped
        self.wrapped: list[str] = []
        self.wrapped_chars = 0
        self.last: Literal["statement", "progress", "other"] = "other"

    def feed(self, line: str) -> None:
        if not line.strip():
            self._end_wrapped()
            self.statement_columns = None
            self.last = "other"
            return
        if self._statement_row(line) or self._continuation(line):
            return
        self._end_wrapped()
        self.last = "other"
        m = g.PROGRESS.match(line)
        if m is not None:
            self.add_progress(m, line)
            return
        if self._statement(line) or self._script_line(line):
            return
        self.statement_columns = None
        if g.is_error(line):
            self.errors.append(line.strip())
            return
        version = g.VERSION.match(line)
        if version is not None:
            self.version = self.version or version["v"]
            self.server_version = self.server_version or version["server"]
            return
        for key, pattern in g.RUN_LINES.items():
            m = pattern.match(line)
            if m is not None:
                self.values[key] = m.groups()
                return

    def add_progress(self, m: re.Match[str], line: str) -> None:
        """A progress line, matched by grammar.PROGRESS: what `feed` does with one."""
        self.progress.add_match(m)
        self.progress_raw = line
        self.last = "progress"

    def _continuation(self, line: str) -> bool:
        """A line pgbench did not print right after a statement row or a progress line.
        After a row, it is held until the block goes on (`_end_wrapped`). Inside a statement
        block, before any row, the block is unreadable. After a progress line that is not
        whole, it is the rest of that line, which a terminal wrapped."""
        if self.last == "statement":
            if g.looks_known(line) and (not line.startswith(" - ") or g.is_script_block_line(line)):
                return False
            self.wrapped.append(line.strip())  # " - " and all: "abalance - :delta" wrapped
            self.wrapped_chars += len(line)
            if self.wrapped_chars > MAX_WRAPPED_CHARS:  # another program's lines after the block
                self.wrapped, self.wrapped_chars = [], 0
                self.statement_columns = None
                self.last = "other"
            return True
        if g.looks_known(line):
            return False
        if self.statement_columns is not None:
            self.unreadable_statement = self.unreadable_statement or line.strip()
            return True
        if self.last == "progress" and not g.looks_whole(self.progress_raw):
            joined = self.progress_raw + line
            m = g.PROGRESS.match(joined)
            if m is not None:
                self.progress.drop_last()
                self.add_progress(m, joined)
            return True
        return False

    def _end_wrapped(self, *, block_goes_on: bool = False) -> None:
        """What the lines after a row were, once the next line shows it: the rest of its
        statement, which a web page or a terminal wrapped at a word (a hard wrap at a column
        was joined by lines.py), when another row follows; else a wrapper script's lines after
        the block, unless they end the statement they follow (it lacks its ";", they end
        with one). Joined with a space: a word wrap broke the line at one."""
        if not self.wrapped:
            return
        if self.statements:
            statement = self.statements[-1]
            ends = not statement.sql.endswith(";") and self.wrapped[-1].endswith(";")
            if block_goes_on or ends:
                statement.sql = " ".join([statement.sql, *self.wrapped])
        self.wrapped = []
        self.wrapped_chars = 0
        if not block_goes_on:
            self.statement_columns = None

    def _statement(self, line: str) -> bool:
        header = g.STATEMENT_HEADER.match(line)
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
        m = g.STATEMENT_PATTERNS[self.statement_columns].match(line)
        if m is None:
            if g.STATEMENT_LINE.match(line) is None:
                return False
            self.unreadable_statement = self.unreadable_statement or line.strip()
            self.last = "other"
            return True
        self._end_wrapped(block_goes_on=True)
        groups = m.groups()
        self.statements.append(
            _StatementAcc(
                sql=groups[-1],
                latency_ms=number(groups[0]),
                failures=int(groups[1]) if self.statement_columns >= 1 else None,
                retries=int(groups[2]) if self.statement_columns == 2 else None,
                script=self.scripts[-1].number if self.scripts else 1,
            )
        )
        self.last = "statement"
        return True

    def _script_line(self, line: str) -> bool:
        header = g.SCRIPT_HEADER.match(line)
        if header is not None:
            name = g.script_name(header[2] or "")  # empty where pasting ate "<builtin: ...>"
            self.scripts.append(_ScriptAcc(number=int(header[1]), name=name))
            self.statement_columns = None
            return True
        if line == g.SCRIPT_STATISTICS:  # 9.6-14: one script with -r (or -L in 9.6)
            self.scripts.append(_ScriptAcc(number=1))
            return True
        if not self.scripts:
            return False
        if not line.startswith(" - "):
            # inside the block, a summary line is a script's that lost its " - " (a web page
            # showed the lines as a list, or as paragraphs)
            line = " - " + line
        for key, pattern in g.SCRIPT_LINES.items():
            m = pattern.match(line)
            if m is not None:
                self.scripts[-1].values[key] = m.groups()
                self.statement_columns = None
                return True
        return g.SCRIPT_NOISE.match(line) is not None

    def build(self, command: tuple[str, ...] | None) -> PgbenchRun:
        self._end_wrapped()
        get = _Getter(self.values)
        mode: Mode | None = None
        script: str | None = None
        transaction_type = get.text("type")
        if transaction_type is not None:
            mode, script = g.mode_of(transaction_type)
        tps_reconnect = get.real("tps_reconnect")
        tps = get.real("tps_without")
        if tps is None:
            tps = get.real("tps_excluding")
        if tps is None:
            tps = tps_reconnect
        client_aborted = any(g.ABORTED.search(e) for e in self.errors)
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
            rate=g.rate_from_command(command),
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
            progress=self.progress,
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
        return number(text) if text is not None else None


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


# --- init -------------------------------------------------------------------------------------


class _InitBuilder:
    """Accumulates an init line by line. Error lines count as the init's when `feed` says so
    (they came while it ran), or when the text holds no run at all (`build(all_errors=True)`)."""

    def __init__(self) -> None:
        self.seen = False  # any line of an init (an error attributed to it included)
        self.version: str | None = None  # pgbench prints none in an init: a text's, if any
        self.scale: int | None = None
        self.generate: Literal["client", "server"] | None = None
        self.phases: dict[str, float] = {}
        self.total: float | None = None
        self.completed = False
        self.created_partitions: int | None = None
        self.errors: list[str] = []  # those that came while it ran
        self.all_errors: list[str] = []

    def feed(self, line: str, *, attributed: bool = True) -> None:
        if g.is_error(line):
            self.all_errors.append(line.strip())
            if attributed:
                self.errors.append(line.strip())
                self.seen = True
            return
        self.seen = True
        if (m := g.CREATING_PARTITIONS.match(line)) is not None:
            self.created_partitions = int(m[1])
        if (m := g.TUPLES.match(line)) is not None:
            if m[3] in (None, "pgbench_accounts"):
                self.scale = int(m[2]) // ACCOUNTS_PER_SCALE
            self.generate = self.generate or "client"
        elif (m := g.GENERATING.match(line)) is not None:
            self.generate = "server" if m[1] == "server" else "client"
        elif (m := g.DONE_IN.match(line)) is not None:
            self.total = float(m[1])
            self.completed = True
            for part in m[2].split(", "):
                if (p := g.PHASE.match(part.strip())) is not None:
                    self.phases[phase_key(p[1])] = float(p[2])
                    if p[1] == "server-side generate":
                        self.generate = "server"
                    elif p[1] == "client-side generate":
                        self.generate = "client"
        elif line == "done.":
            self.completed = True

    def build(self, command: tuple[str, ...] | None, *, all_errors: bool = False) -> PgbenchInit:
        argv = command or ()
        scale = self.scale if self.scale is not None else g.scale_from_command(command)
        generate = self.generate
        steps = g.option_value(argv, "-I", "--init-steps") or ""
        if generate is None and ("G" in steps or "g" in steps):  # -I dtGvp: server-side
            generate = "server" if "G" in steps else "client"
        partitions = g.integer(g.option_value(argv, "--partitions", "--partitions"))
        partitions = partitions if partitions is not None else self.created_partitions
        method = g.option_value(argv, "--partition-method", "--partition-method")
        return PgbenchInit(
            version=self.version,
            scale=scale,
            generate=generate,
            fillfactor=g.integer(g.option_value(argv, "-F", "--fillfactor")),
            partitions=partitions,
            partition_method=method or ("range" if partitions else None),
            phases=self.phases,
            total_s=self.total,
            completed=self.completed,
            command=command,
            errors=tuple(self.all_errors if all_errors else self.errors),
        )


# --- entry points --------------------------------------------------------------------------------


class PartParser:
    """The init and the run of one pgbench invocation's lines, read one at a time (see
    invocations.py; `parse_lines` of lines held in memory). Lines are classified by what they
    say, so stdout and stderr may come in any order; error lines go to the init when they come
    after its first line and before its end ("done ...") or the first line of a run, and to
    the init when nothing else is there. An echoed `pgbench -i` whose output is not there
    (it went to /dev/null) is no init beside a run; `pgbench --version` is neither."""

    def __init__(self) -> None:
        self._init = _InitBuilder()
        self._run = _RunBuilder()
        self._commands: list[tuple[str, ...]] = []
        self._init_open = False
        self._run_data = False  # what only a benchmark run prints
        self._run_errors = False

    def feed(self, line: str, role: g.LineRole | None = None) -> None:
        """One cleaned line, and its `grammar.line_role` when known."""
        role = role if role is not None else g.line_role(line)[0]
        if role == "progress":
            m = g.PROGRESS.match(line)
            if m is not None:
                self.feed_progress(m, line)
                return
        if role == "command":
            argv = tuple(parse_command_line(line) or ())
            self._commands.append(argv)
            self._init_open = g.is_init_command(argv) and not g.runs_nothing(argv)
            return
        if role == "init":
            self._init.feed(line)
            self._init_open = not g.is_init_end(line)
            return
        if role in ("error", "aborted"):
            self._init.feed(line, attributed=self._init_open)
            if self._init_open:
                return
            self._run_errors = True
        elif role == "summary" or (role == "version" and "(PostgreSQL)" not in line):
            self._run_data = True  # pgbench 14+ prints its version first in a run, not an init
        if line.strip():
            self._init_open = False
        self._run.feed(line)

    def feed_progress(self, m: re.Match[str], line: str) -> None:
        """A progress line matched by grammar.PROGRESS: `feed`'s shortcut for the commonest."""
        self._init_open = False
        self._run_data = True
        run = self._run  # add_progress, inline: a long text is mostly progress lines
        run.progress.add_match(m)
        run.progress_raw = line
        run.last = "progress"

    def finish(self) -> tuple[PgbenchInit | None, PgbenchRun | None]:
        commands = [c for c in self._commands if not g.runs_nothing(c)]
        init_command = next((c for c in commands if g.is_init_command(c)), None)
        run_command = next((c for c in commands if not g.is_init_command(c)), None)
        has_run = self._run_data or run_command is not None
        init: PgbenchInit | None = None
        if self._init.seen or (init_command is not None and not has_run):
            # errors belong to the init when there is nothing else
            init = self._init.build(init_command, all_errors=not has_run)
        run: PgbenchRun | None = None
        if has_run or (init is None and self._run_errors):
            run = self._run.build(run_command)
        return init, run


def detect_kind(text: str) -> Kind | None:
    """What an output is: "run" when it has anything of a benchmark run (an output holding an init
    and then a run is a "run": split it with `parse_any`), "init" for `pgbench -i` output alone,
    else None."""
    parser = PartParser()
    for line in clean_lines(text):
        parser.feed(line)
    commands = [c for c in parser._commands if not g.runs_nothing(c)]
    if parser._run_data or any(not g.is_init_command(c) for c in commands):
        return "run"
    if parser._init.seen or any(g.is_init_command(c) for c in commands):
        return "init"
    return None


def parse_run(text: str) -> PgbenchRun:
    """Parse a benchmark run's output; init lines in it are ignored."""
    parser = PartParser()
    for line in clean_lines(text):
        parser.feed(line)
    commands = [c for c in parser._commands if not g.runs_nothing(c)]
    return parser._run.build(next((c for c in commands if not g.is_init_command(c)), None))


def parse_init(text: str) -> PgbenchInit:
    """Parse `pgbench -i` output (errors anywhere in the text count as the init's when the text
    holds no run)."""
    parser = PartParser()
    version: str | None = None
    for line in clean_lines(text):
        parser.feed(line)
        if (v := g.VERSION.match(line)) is not None:
            version = version or v["v"]
    commands = [c for c in parser._commands if not g.runs_nothing(c)]
    init_command = next((c for c in commands if g.is_init_command(c)), None)
    if not parser._run_data:
        parser._init.version = version
    return parser._init.build(init_command, all_errors=not parser._run_data)


def parse_any(text: str) -> tuple[PgbenchInit | None, PgbenchRun | None]:
    """Split an output that may hold an init, a run, or both, and parse each part."""
    return parse_lines(clean_lines(text))


def parse_lines(lines: Iterable[str]) -> tuple[PgbenchInit | None, PgbenchRun | None]:
    """`parse_any` of lines already cleaned by `clean_lines`."""
    parser = PartParser()
    for line in lines:
        parser.feed(line)
    return parser.finish()
