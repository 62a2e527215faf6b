"""What pasting does to pgbench output, undone (pasted.py, lines.py), and the parser read as a
stream (issue 26, item 16, and the import of very long texts). The whole pastes are imported
from tests/data/pgbench/pastes in tests/integration/test_import.py; these tests pin each
mechanism on lines of the recorded outputs."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from howfast.workloads.pgbench.grammar import builtin_mode, mode_of, script_name
from howfast.workloads.pgbench.invocations import parse_all, parse_source
from howfast.workloads.pgbench.lines import clean_lines, reindent
from howfast.workloads.pgbench.parse import PgbenchInit, PgbenchRun, ProgressPoint, parse_lines
from howfast.workloads.pgbench.pasted import split_records, strip_escapes, unmark
from howfast.workloads.pgbench.progress import ProgressSeries

DATA = Path(__file__).parent.parent / "data" / "pgbench"
PROGRESS = "progress: 2.0 s, 2259.2 tps, lat 1.751 ms stddev 1.329, 0 failed"
TPS = "tps = 2177.857349 (without initial connection time)"


def read(name: str) -> str:
    return (DATA / name).read_text()


# --- terminal escapes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pasted",
    [
        "\x1b[1A\x1b[2K" + PROGRESS,  # a line redrawn in place
        "\x1b[1;33m" + PROGRESS + "\x1b(B\x1b[m",  # colour, reset by `tput sgr0`
        "\x1b[?25l" + PROGRESS + "\x1b[?25h",  # cursor hidden and shown
        "\x1b]0;postgres@db1: ~\x07" + PROGRESS,  # a window title
        "\x1b]0;postgres@db1: ~\x1b\\" + PROGRESS,  # the same, ended by ST
        "\x1b7" + PROGRESS + "\x1b8",  # cursor saved and restored
        "\x9b2K" + PROGRESS,  # the 8-bit CSI
        "^[[1A^[[2K^M" + PROGRESS,  # as `cat -v` shows them
        PROGRESS + "^[(B^[[m^M",
    ],
)
def test_escape_sequences_are_not_part_of_a_line(pasted: str) -> None:
    assert strip_escapes(pasted) == PROGRESS


def test_caret_notation_inside_a_line_is_text() -> None:
    """Inside a line "^[a-z]" is as likely a statement's regular expression."""
    row = "         0.120  SELECT 1 WHERE 'a' ~ '^[a-z]+$';"
    assert strip_escapes(row) == row
    assert strip_escapes("\tpgbench\t") == "\tpgbench\t"  # a tab is not a control to drop


def test_a_carriage_return_ends_a_line_and_escapes_glued_to_it_go() -> None:
    text = f"{PROGRESS}\x1b[K\r\x1b[1A\x1b[2K{PROGRESS.replace('2.0 s', '3.0 s')}\n"
    assert clean_lines(text) == [PROGRESS, PROGRESS.replace("2.0 s", "3.0 s")]


# --- Markdown ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pasted",
    [
        f"**{TPS}**",
        f"__{TPS}__",
        f"`{TPS}`",
        f"``{TPS}``",
        f"**`{TPS}`**",
        f"*{TPS}*",
        "tps = **2177.857349** (without initial connection time)",
        "tps = `2177.857349` (without initial connection time)",
        f"- **{TPS}**",  # a list item
        f"* `{TPS}`",
    ],
)
def test_markdown_marks_around_a_line_or_a_figure(pasted: str) -> None:
    assert unmark(pasted) == TPS
    assert clean_lines(pasted) == [TPS]


def test_a_statements_own_marks_stay() -> None:
    lines = ["statement latencies in milliseconds and failures:"]
    lines += ["         0.120           0  SELECT `5`, '**' FROM t;"]
    assert clean_lines("\n".join(lines)) == lines


# --- a pager's fixed-width records -----------------------------------------------------------


def test_lines_joined_and_padded_to_133_columns_are_split() -> None:
    summary = read("run-tpcb-pg15.txt").splitlines()[7:19]
    joined = "".join(line.ljust(133) for line in summary)
    assert clean_lines(joined) == summary


def test_a_line_with_wide_gaps_is_not_taken_for_records() -> None:
    """Pieces that are not pgbench's lines are not records, whatever the gaps."""
    prose = "latency, in ms:   " + "1.0   " * 30
    assert clean_lines(prose) == [prose.rstrip()]
    row = "         0.001           0  SELECT 1;" + " " * 30 + "x" * 80
    assert split_records(row, lambda piece: piece.startswith("0.001")) == [row]


# --- hard wraps, wrapper lines, console padding ----------------------------------------------


def test_a_wrapper_line_after_a_whole_tps_line_is_not_glued_to_it() -> None:
    """Two runs whose tps lines are the longest lines, each followed by a loop's line."""
    run = read("run-t-pg13.txt")
    text = run + "=== run 1 done ===\n" + run + "=== run 2 done ===\n"
    runs = [item for item in parse_all(text) if isinstance(item, PgbenchRun)]
    assert [r.tps for r in runs] == [2473.518220, 2473.518220]


def test_a_tps_line_cut_by_a_wrap_is_joined() -> None:
    text = f"{TPS[:45]}\n{TPS[45:]}\n" * 2
    assert clean_lines(text) == [TPS, TPS]


def test_lines_padded_to_a_consoles_width_are_not_wraps() -> None:
    """A Windows console copy pads every line with spaces: none is a wrapped line."""
    lines = [*read("run-t-pg13.txt").splitlines(), "script statistics:", "C:\\bench> exit"]
    text = "".join(line.ljust(120) + "\r\n" for line in lines)
    assert clean_lines(text) == lines


def test_a_line_after_the_last_statement_row_is_not_its_continuation() -> None:
    text = read("run-tpcb-pg15.txt") + "--- done, sleeping 30 s\n"
    (run,) = [item for item in parse_all(text) if isinstance(item, PgbenchRun)]
    assert run.statements[-1].sql == "END;" and run.notes == ()


# --- statements wrapped at a word, script lines that lost their " - " (issue 35) ---------------

# a header, and a row longer than the wrapped ones: they are no terminal's cut at the widest
ROWS_HEADER = (
    "statement latencies in milliseconds and failures:\n"
    "         0.293           0  UPDATE pgbench_tellers SET tbalance = tbalance + :delta "
    "WHERE tid = :tid;\n"
)
TELLERS = ("UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;", 0.293)


def statements_of(text: str) -> list[tuple[str, float]]:
    (run,) = [item for item in parse_all(text) if isinstance(item, PgbenchRun)]
    return [(s.sql, s.latency_ms) for s in run.statements]


@pytest.mark.parametrize("indent", ["", "    ", " " * 28])
def test_the_rest_of_a_statement_wrapped_at_a_word_joins_it_and_later_rows_stay(
    indent: str,
) -> None:
    """Shorter than the text's widest line, so no terminal's cut: a page broke it at a space
    (the rest alone, indented like the text, or under the statement)."""
    text = (
        TPS + "\n" + ROWS_HEADER + "         0.152           0  BEGIN;\n"
        "         0.207           0  UPDATE pgbench_accounts SET abalance = abalance +\n"
        f"{indent}:delta WHERE aid = :aid;\n"
        "         0.218           0  END;\n"
    )
    assert statements_of(text) == [
        TELLERS,
        ("BEGIN;", 0.152),
        ("UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;", 0.207),
        ("END;", 0.218),
    ]


@pytest.mark.parametrize("indent", ["", "  "])  # indented, it is read as " - ..." first
def test_a_wrapped_rest_that_starts_with_a_dash_is_no_script_line(indent: str) -> None:
    text = (
        TPS + "\n" + ROWS_HEADER + "         0.207           0  UPDATE pgbench_accounts SET "
        "abalance = abalance\n"
        f"{indent}- :delta WHERE aid = :aid;\n"
        "         0.218           0  END;\n"
    )
    assert statements_of(text)[1:] == [
        ("UPDATE pgbench_accounts SET abalance = abalance - :delta WHERE aid = :aid;", 0.207),
        ("END;", 0.218),
    ]


def test_the_last_statements_rest_joins_it_only_when_it_ends_it() -> None:
    """After the last row nothing tells a wrapped rest from a wrapper's line but this: the
    statement lacks its ";" and the line ends with one."""
    rows = TPS + "\n" + ROWS_HEADER + "         0.207           0  INSERT INTO t (a, b) VALUES\n"
    assert statements_of(rows + "(1, 2);\n")[1:] == [("INSERT INTO t (a, b) VALUES (1, 2);", 0.207)]
    assert statements_of(rows + "--- done, sleeping 30 s\n")[1:] == [
        ("INSERT INTO t (a, b) VALUES", 0.207)
    ]


def test_script_lines_that_lost_their_dash_stay_the_scripts() -> None:
    """A page showed the " - " lines of the script blocks as a list, whose bullets a copy
    leaves out: "number of failed transactions: ..." and "latency average = ..." come again
    after the summary's, and are each script's, not a new run."""
    recorded = read("run-multi-pg15.txt")
    listed = "".join(line.removeprefix(" - ") for line in recorded.splitlines(keepends=True))
    assert listed != recorded
    assert parse_all(listed) == parse_all(recorded)


def test_a_script_line_left_unindented_gets_its_indent_back() -> None:
    assert reindent("- statement latencies in milliseconds:") == (
        " - statement latencies in milliseconds:"
    )
    assert reindent("- number of transactions skipped: 3 (0.075%)") == (
        " - number of transactions skipped: 3 (0.075%)"
    )
    assert reindent("- a list item of the prose around") == "- a list item of the prose around"


def test_an_init_tuples_line_cut_by_a_wrap_still_gives_the_scale() -> None:
    text = (
        "creating tables...\n"
        "1000000 of 1000000 tuples (100%) done (elapsed 1.33 s, remaining\n"
        "0.00 s)\n"
        "vacuum...\nset primary keys...\ndone.\n"
    )
    (init,) = parse_all(text)
    assert isinstance(init, PgbenchInit)
    assert (init.scale, init.completed, init.phases, init.total_s) == (10, True, {}, None)


# --- builtin scripts' names, damaged ---------------------------------------------------------


@pytest.mark.parametrize(
    ("printed", "mode"),
    [
        ("<builtin: TPC-B (sort of)>", "tpcb-like"),
        ("builtin: TPC-B (sort of)>", "tpcb-like"),  # a log collector ate "<"
        ("<builtin: select only", "select-only"),
        ("&lt;builtin: simple update&gt;", "simple-update"),  # copied from HTML source
        ("TPC-B (sort of)", "tpcb-like"),  # before 9.6
        ("Update only pgbench_accounts", "simple-update"),
        ("builtin: my own.sql>", None),
        ("custom.sql", None),
    ],
)
def test_builtin_scripts_by_their_printed_name(printed: str, mode: str | None) -> None:
    assert builtin_mode(printed) == mode


def test_a_damaged_builtin_name_is_restored_and_an_empty_one_is_no_mode() -> None:
    assert script_name("builtin: select only>") == "<builtin: select only>"
    assert script_name("TPC-B (sort of)") == "TPC-B (sort of)"  # as 9.5 printed it
    assert script_name("") == ""
    assert mode_of("builtin: TPC-B (sort of)>") == ("tpcb-like", None)
    assert mode_of("") == (None, None)
    assert mode_of("/scripts/custom.sql") == ("custom", "/scripts/custom.sql")


def test_an_empty_script_name_keeps_its_block() -> None:
    text = read("run-multi-pg15.txt").replace("<builtin: select only>", "")
    (run,) = parse_all(text)
    assert isinstance(run, PgbenchRun)
    assert [(s.number, s.name, s.weight) for s in run.scripts] == [
        (1, "", 1),
        (2, "<builtin: TPC-B (sort of)>", 1),
    ]


# --- echoed commands ---------------------------------------------------------------------------


def test_an_echoed_init_without_its_output_beside_a_run_is_no_init() -> None:
    lines = ["$ pgbench -i -s 2 bench >/dev/null 2>&1", *clean_lines(read("run-tpcb-pg15.txt"))]
    init, run = parse_lines(lines)
    assert init is None and run is not None and run.tps == 2177.857349


def test_an_echoed_init_alone_is_an_init_that_did_not_finish() -> None:
    init, run = parse_lines(["$ pgbench -i -s 2 bench"])
    assert run is None and init is not None and not init.completed and init.scale == 2


def test_pgbench_version_and_help_are_no_run() -> None:
    lines = ["$ pgbench --version", "pgbench (PostgreSQL) 15.18", "$ pgbench -R 800 -c 4 bench"]
    _, run = parse_lines([*lines, *clean_lines(read("run-rate-limit-pg15.txt"))])
    assert run is not None and run.rate == 800.0
    assert parse_all("$ pgbench --help\n") == []


# --- progress points as columns --------------------------------------------------------------


def test_a_progress_series_reads_back_its_points() -> None:
    points = [
        ProgressPoint(1.0, 10.0, 1.5),
        ProgressPoint(2.0, 11.0, 1.4, stddev_ms=0.2, failed=0),
        ProgressPoint(3.0, 12.0, 1.3, stddev_ms=0.3, lag_ms=0.1, skipped=4, failed=1),
    ]
    series = ProgressSeries(points)
    assert series == points and list(series) == points
    assert series[-1] == points[-1] and series[1:] == points[1:]
    assert len(series) == 3 and bool(ProgressSeries()) is False
    series.drop_last()
    assert series == points[:2]
    with pytest.raises(IndexError):
        series[2]


# --- read as a stream ------------------------------------------------------------------------


def long_run(points: int) -> Iterator[str]:
    """A pgbench 15 run with `points` progress lines, made line by line, never held."""
    lines = read("run-tpcb-pg15.txt").splitlines()
    yield from lines[:2]
    for i in range(points):
        yield f"progress: {i + 1}.0 s, {1000 + i % 977}.5 tps, lat 1.{i % 997:03d} ms stddev 0.5"
    yield from lines[7:]


def test_a_long_output_is_read_as_a_stream_and_held_as_columns() -> None:
    """The parser reads the text from a source it calls for each pass, never holding it:
    two passes, and what it keeps is the progress columns (36 bytes a point), less than
    the text itself (57 bytes a line; a list of its lines would take twice that)."""
    points = 100_000
    passes = 0

    def source() -> Iterator[str]:
        nonlocal passes
        passes += 1
        return long_run(points)

    text_bytes = sum(len(line) + 1 for line in long_run(points))
    tracemalloc.start()
    try:
        (run,) = parse_source(source)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(run, PgbenchRun) and isinstance(run.progress, ProgressSeries)
    assert len(run.progress) == points and run.tps == 2177.857349
    last = points - 1
    assert run.progress[-1] == ProgressPoint(
        float(points), 1000 + last % 977 + 0.5, float(f"1.{last % 997:03d}"), 0.5
    )
    assert passes == 2
    assert peak < text_bytes, (peak, text_bytes)


def test_init_and_run_of_a_stream_keep_their_order() -> None:
    text = read("init-client-pg15.txt") + read("run-tpcb-pg15.txt")
    found = parse_source(text.splitlines)
    assert [type(item) for item in found] == [PgbenchInit, PgbenchRun]


def test_lines_after_the_last_row_are_not_held_without_end() -> None:
    """Another program's log after a run's last row is no statement's rest: what is held for
    that is bounded, and dropped (the statement stays as printed)."""
    log = "".join(f"app: request {n} served\n" for n in range(2000))
    rows = TPS + "\n" + ROWS_HEADER + "         0.207           0  INSERT INTO t (a, b) VALUES\n"
    assert statements_of(rows + log + "end of log;\n")[1:] == [
        ("INSERT INTO t (a, b) VALUES", 0.207)
    ]
