"""`howfast import pgbench|fio` on inputs as people publish them (issue 18): several runs in
one paste, indented copies, other encodings, cut or failed outputs. The CLI is called
in-process (like a user would call it, with a store of the test's own); the inputs are
recorded files of tests/data (see the READMEs there)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from howfast.analysis.rate_curves import rate_curves
from howfast.cli import main
from howfast.store import open_store

PGBENCH = Path(__file__).parent.parent / "data" / "pgbench"
FIO = Path(__file__).parent.parent / "data" / "fio"

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """(exit status, stdout, stderr) of howfast with a store of the test's own; `stdin` is
    given as bytes, as a pipe delivers it."""
    monkeypatch.setenv("HOWFAST_STORE", str(tmp_path / "results.db"))

    def call(*args: str, stdin: bytes = b"") -> tuple[int, str, str]:
        fake = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
        monkeypatch.setattr("sys.stdin", fake)
        status = main(list(args))
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return call


def imported(cli: Cli, kind: str, source: str, stdin: bytes = b"") -> dict[str, Any]:
    status, out, err = cli("import", kind, source, "--json", stdin=stdin)
    assert status == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def stored_run_count(cli: Cli) -> int:
    status, out, _ = cli("results", "list", "--json")
    assert status == 0
    return len(json.loads(out))


# --- what the input is -------------------------------------------------------------------------


def test_empty_input_and_a_directory_are_named_for_what_they_are(cli: Cli, tmp_path: Path):
    status, _, err = cli("import", "pgbench", "/dev/null")
    assert status == 2 and "empty input" in err and "no such file" not in err
    status, _, err = cli("import", "fio", "-", stdin=b"")
    assert status == 2 and "empty input" in err
    status, _, err = cli("import", "pgbench", str(tmp_path))
    assert status == 2 and "is a directory" in err
    status, _, err = cli("import", "pgbench", str(tmp_path / "missing.txt"))
    assert status == 2 and "no such file" in err
    assert stored_run_count(cli) == 0


def test_utf16_from_powershell_is_decoded(cli: Cli):
    doc = imported(cli, "fio", str(FIO / "fio-3.33_randrw-4k-qd1_powershell-utf16.json"))
    plain = imported(cli, "fio", str(FIO / "fio-3.33_randrw-4k-qd1_json.json"))
    assert [s["metrics"] for s in doc["steps"]] == [s["metrics"] for s in plain["steps"]]
    data = (PGBENCH / "run-select-only-pg15-powershell-utf16.txt").read_bytes()
    run = imported(cli, "pgbench", "-", stdin=data)
    assert run["steps"][0]["metrics"]["tps"] == 18485.636365


def test_bytes_that_are_not_text_say_it_is_an_encoding_problem(cli: Cli):
    latin1 = (
        (PGBENCH / "run-tpcb-pg15.txt").read_text().replace("TPC-B", "TPC-\xe9").encode("latin-1")
    )
    status, _, err = cli("import", "pgbench", "-", stdin=latin1)
    assert status == 2 and "not readable as UTF-8" in err and "iconv" in err
    utf16_cut = b"\xff\xfe" + "tps = 1".encode("utf-16-le") + b"\x00\xd8"  # a lone surrogate
    status, _, err = cli("import", "fio", "-", stdin=utf16_cut)
    assert status == 2 and "not readable as UTF-16" in err
    assert stored_run_count(cli) == 0


# --- pasted copies -------------------------------------------------------------------------------


def test_unreadable_statement_rows_are_left_out_with_a_warning(cli: Cli):
    doc = imported(cli, "pgbench", str(PGBENCH / "run-select-only-pg15-rows-cut.txt"))
    (step,) = doc["steps"]
    assert step["status"] == "completed" and "statements" not in step["metrics"]
    assert any("per-statement latencies could not be read" in w for w in step["warnings"])
    stripped = imported(cli, "pgbench", str(PGBENCH / "run-tpcb-pg15-lstripped.txt"))
    (step,) = stripped["steps"]
    assert len(step["metrics"]["statements"]) == 11 and step["warnings"] == []


def test_an_indented_or_quoted_copy_is_imported(cli: Cli):
    for name in ("run-tpcb-pg14-indented.txt", "run-multi-pg15-quoted.md"):
        (step,) = imported(cli, "pgbench", str(PGBENCH / name))["steps"]
        assert step["status"] == "completed" and step["metrics"]["tps"] > 0
        assert len(step["metrics"]["statements"]) in (11, 13)


# --- several runs in one text --------------------------------------------------------------------


def test_every_run_of_a_text_becomes_a_step_in_order(cli: Cli):
    doc = imported(cli, "pgbench", str(PGBENCH / "multi-four-runs-pg15.txt"))
    steps = doc["steps"]
    assert [s["params"]["clients"] for s in steps] == [1, 2, 4, 8]
    assert [s["metrics"]["tps"] for s in steps] == [
        1199.719865,
        1107.441522,
        721.196577,
        1068.442289,
    ]
    assert all(s["status"] == "completed" and len(s["metrics"]["statements"]) == 11 for s in steps)
    assert doc["status"] == "completed" and stored_run_count(cli) == 1


def test_fixed_rate_runs_make_one_rate_curve(cli: Cli, tmp_path: Path):
    doc = imported(cli, "pgbench", str(PGBENCH / "multi-rate-curve-pg15.txt"))
    steps = doc["steps"]
    assert [s["params"]["rate"] for s in steps] == [100, 200, 400, 800]
    assert all(s["params"]["latency_limit_ms"] == 5.0 for s in steps)
    with open_store(str(tmp_path / "results.db")) as store:
        run = store.get_run(int(doc["id"]))
    assert run is not None
    (curve,) = rate_curves(run.steps)
    assert [row.offered for row in curve.rows] == [100, 200, 400, 800]
    assert curve.rows[0].lag_avg_ms == 0.675


def test_a_failed_run_among_others_is_a_failed_step_with_its_error(cli: Cli):
    doc = imported(cli, "pgbench", str(PGBENCH / "multi-init-runs-refused-pg15.txt"))
    steps = doc["steps"]
    assert [(s["workload"], s["status"]) for s in steps] == [
        ("pgbench-init", "completed"),
        ("pgbench", "completed"),
        ("pgbench", "failed"),
        ("pgbench", "completed"),
    ]
    assert "Connection refused" in steps[2]["error"]
    assert steps[3]["params"]["mode"] == "select-only" and doc["status"] == "failed"


# --- text without a summary ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("run-refused-pg15.txt", "pgbench failed before its summary: pgbench: error: connection"),
        ("run-notinit-pg15.txt", "pgbench failed before its summary"),
        ("run-tpcb-pg15-cut.txt", "ends before pgbench's 'tps = ...' line"),
        ("run-tpcb-pg14-cut-in-progress.txt", "ends after 2 progress lines"),
        ("run-aborted-pg15.txt", "pgbench stopped before its summary's 'tps = ...' line"),
    ],
)
def test_text_without_a_summary_is_refused_and_says_what_is_missing(cli: Cli, name: str, said: str):
    status, out, err = cli("import", "pgbench", str(PGBENCH / name), "--json")
    assert status == 2 and out == ""
    assert "nothing stored" in err and said in err
    assert stored_run_count(cli) == 0


def test_an_init_cut_before_its_end_is_refused(cli: Cli):
    text = (PGBENCH / "init-client-pg15.txt").read_text().split("vacuuming")[0]
    status, _, err = cli("import", "pgbench", "-", stdin=text.encode())
    assert status == 2 and "before pgbench's 'done' line" in err
    assert stored_run_count(cli) == 0


# --- versions ------------------------------------------------------------------------------------


def test_the_target_has_the_servers_version_and_the_client_is_kept(cli: Cli):
    doc = imported(cli, "pgbench", str(PGBENCH / "run-simple-update-pg16.txt"))
    assert doc["targets"][0]["pg_version"] == "15.6"  # "pgbench (16.2 (...), server 15.6)"
    assert doc["environment"]["pgbench_version"] == "16.2"
    same = imported(cli, "pgbench", str(PGBENCH / "run-tpcb-pg15.txt"))
    assert same["targets"][0]["pg_version"] == "15.18"
    assert same["environment"]["pgbench_version"] == "15.18"


# --- params under their documented names ---------------------------------------------------------


def test_scripts_are_listed_under_scripts(cli: Cli):
    (step,) = imported(cli, "pgbench", str(PGBENCH / "run-multi-pg15.txt"))["steps"]
    assert step["params"]["mode"] == "custom"
    assert step["params"]["scripts"] == ["<builtin: select only>", "<builtin: TPC-B (sort of)>"]
    assert step["params"]["script_weights"] == [1, 1]
    (step,) = imported(cli, "pgbench", str(PGBENCH / "run-custom-pg15.txt"))["steps"]
    assert step["params"]["mode"] == "custom" and step["params"]["scripts"] == ["custom.sql"]
    assert "script" not in step["params"] and "script_weights" not in step["params"]


def test_init_params_say_how_the_data_was_generated(cli: Cli):
    (step,) = imported(cli, "pgbench", str(PGBENCH / "init-server-partitions-pg15.txt"))["steps"]
    assert step["params"] == {
        "scale": 2,
        "generate": "server",
        "fillfactor": 90,
        "partitions": 4,
        "partition_method": "range",
    }
    (step,) = imported(cli, "pgbench", str(PGBENCH / "init-server-pg13.txt"))["steps"]
    assert step["params"] == {"scale": 100, "generate": "server"}
    (step,) = imported(cli, "pgbench", str(PGBENCH / "init-client-pg15.txt"))["steps"]
    assert step["params"] == {"scale": 2, "generate": "client"}


# --- fio -----------------------------------------------------------------------------------------


def test_fio_stopped_by_a_signal_is_stored_with_a_warning(cli: Cli):
    doc = imported(cli, "fio", str(FIO / "fio-3.33_randrw-4k-qd1_sigint.stdout"))
    (step,) = doc["steps"]
    assert step["status"] == "completed" and step["metrics"]["read_iops"] > 0
    assert any("terminated by signal 2 (SIGINT)" in w for w in step["warnings"])
    (plain,) = imported(cli, "fio", str(FIO / "fio-3.33_randrw-4k-qd1_json.json"))["steps"]
    assert not any("signal" in w for w in plain["warnings"])


def test_fio_figures_that_are_not_measurements_are_refused_by_name(cli: Cli, tmp_path: Path):
    """issue 26, item 6: a figure howfast keeps that is not a number fio can have measured
    ("iops": "fast", C's -nan, the 2^64-1 sentinel, a negative count) refuses the whole
    output, naming its JSON path and value; nothing is stored."""
    doc = json.loads((FIO / "fio-3.33_randrw-4k-qd1_json.json").read_text())
    cases = [("iops", '"fast"', 'is "fast"'), ("total_ios", "-3", "is -3")]
    cases += [("bw_bytes", "18446744073709551615", "is 18446744073709551615")]
    cases += [("iops", "-nan", "is nan")]
    for key, token, said in cases:
        changed = json.loads(json.dumps(doc))
        changed["jobs"][1]["read"][key] = "@VALUE@"
        path = tmp_path / f"{key}.json"
        path.write_text(json.dumps(changed, indent=2).replace('"@VALUE@"', token))
        status, _, err = cli("import", "fio", str(path))
        assert status == 2, err
        assert f"jobs[1].read.{key} {said}" in err and "nothing stored" in err
    assert stored_run_count(cli) == 0


# --- real pastes (issue 26, item 16; tests/data/pgbench/pastes/README.md) -------------------

PASTES = PGBENCH / "pastes"
FOUR_RUNS_TPS = [1199.719865, 1107.441522, 721.196577, 1068.442289]


def steps_of(cli: Cli, path: Path) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = imported(cli, "pgbench", str(path))["steps"]
    return steps


def with_series(cli: Cli, path: Path) -> list[dict[str, Any]]:
    """The steps of an import with their series, as `results show --series` gives them."""
    run_id = imported(cli, "pgbench", str(path))["id"]
    status, out, err = cli("results", "show", run_id, "--json", "--series")
    assert status == 0, err
    steps: list[dict[str, Any]] = json.loads(out)["steps"]
    return steps


@pytest.mark.parametrize(
    "name",
    ["wrapper-loop-pg15.txt", "wrapper-loop-summaries-pg15.txt", "wrapper-two-runs-pg15.txt"],
)
def test_runs_with_a_wrapper_scripts_lines_between_them(cli: Cli, name: str):
    """A loop's own lines ("### clients=2 started ...", "--- done, sleeping 30 s") after a
    run's last line were glued onto it as a terminal's hard wrap: onto the tps line (the run
    lost its tps, or every run did and the text was refused) or onto the last statement."""
    steps = steps_of(cli, PASTES / name)
    assert [s["status"] for s in steps] == ["completed"] * len(steps)
    assert [s["metrics"]["tps"] for s in steps] == FOUR_RUNS_TPS[: len(steps)]
    assert [s["params"]["clients"] for s in steps] == [1, 2, 4, 8][: len(steps)]
    for step in steps:
        statements = step["metrics"].get("statements", [{"sql": "END;"}])
        assert statements[-1]["sql"] == "END;"


def test_pgbench_13s_two_tps_lines_before_a_wrapper_line(cli: Cli):
    (step,) = steps_of(cli, PASTES / "wrapper-pg13.txt")
    assert step["status"] == "completed"
    assert step["metrics"]["tps"] == 2473.518220
    assert step["metrics"]["tps_including_connections"] == 2468.722014


@pytest.mark.parametrize(
    ("name", "original", "command"),
    [
        ("terminal-escapes-pg15.typescript", "run-tpcb-pg15.txt", ""),
        ("terminal-escapes-cat-v-pg15.txt", "run-tpcb-pg15.txt", ""),
        ("pager-joined-133-pg15.txt", "run-tpcb-pg15.txt", ""),
        ("lost-bracket-pg15.txt", "run-tpcb-pg15.txt", ""),
        ("lost-brackets-multi-pg15.txt", "run-multi-pg15.txt", ""),
        ("echoed-init-command-pg15.txt", "run-tpcb-pg15.txt", ""),
        (
            "version-command-pg15.txt",
            "run-rate-limit-pg15.txt",
            "$ pgbench -c 4 -j 2 -T 4 -P 1 -r -R 800 -L 2 bench\n",
        ),
    ],
)
def test_a_paste_imports_as_the_output_it_was_made_from(
    cli: Cli, tmp_path: Path, name: str, original: str, command: str
):
    """Terminal escapes glued to lines (a `script` session, and the same shown by `cat -v`),
    summary lines joined on one line by a pager that pads each to 133 columns, the "<" of
    "<builtin: ...>" eaten by a log collector, an echoed `pgbench --version` or `pgbench -i`
    whose output is not there: the same steps, figures and series as the recorded output
    (with the run's command echoed above it, when the paste has it)."""
    recorded_text = tmp_path / original
    recorded_text.write_text(command + (PGBENCH / original).read_text())
    (pasted,) = with_series(cli, PASTES / name)
    (recorded,) = with_series(cli, recorded_text)
    for key in ("status", "metrics", "params", "series", "error", "warnings"):
        assert pasted[key] == recorded[key], key


def test_a_tps_line_in_markdown_bold(cli: Cli):
    (step,) = steps_of(cli, PASTES / "markdown-bold-tps-pg15.md")
    assert step["status"] == "completed"
    assert step["metrics"]["tps"] == 2177.857349
    assert step["metrics"]["transactions"] == 10881
    assert step["params"]["mode"] == "tpcb-like"


def test_summary_lines_in_markdown_inline_code(cli: Cli):
    doc = imported(cli, "pgbench", str(PASTES / "markdown-inline-code-pg14.md"))
    (step,) = doc["steps"]
    assert step["status"] == "completed"
    assert (step["metrics"]["tps"], step["metrics"]["transactions"]) == (634.224710, 1267)
    assert step["metrics"]["latency_avg_ms"] == 12.614
    assert step["params"]["clients"] == 8 and step["params"]["scale"] == 600
    assert doc["environment"]["pgbench_version"] == "14.11"


def test_scripts_whose_printed_names_are_empty_keep_their_weights(cli: Cli):
    """A rendered web page read "<builtin: select only>" as an HTML tag: "SQL script 1: "."""
    (step,) = steps_of(cli, PASTES / "empty-script-names-pg15.txt")
    assert step["params"]["mode"] == "custom"
    assert step["params"]["scripts"] == ["", ""]
    assert step["params"]["script_weights"] == [1, 1]
    assert step["metrics"]["tps"] == 4099.645333


def test_a_96_init_and_rate_run_copied_from_a_console(cli: Cli):
    """Every line padded with spaces to the console's width: a padded line is not a line cut
    by a wrap, and "script statistics:" is pgbench's own line."""
    init, run = steps_of(cli, PASTES / "init-rate-run-pg96-console.txt")
    assert (init["workload"], init["status"], init["params"]["scale"]) == (
        "pgbench-init",
        "completed",
        10,
    )
    assert (run["workload"], run["status"]) == ("pgbench", "completed")
    assert run["metrics"]["tps"] == 1000.873001
    assert run["metrics"]["skipped"] == 3 and run["metrics"]["late"] == 14
    assert run["params"]["rate"] == 1000.0 and run["params"]["mode"] == "select-only"
    assert [s["sql"] for s in run["metrics"]["statements"]] == [
        r"\set aid random(1, 100000 * :scale)",
        "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;",
    ]


# --- wrapped pastes (issue 35; tests/data/pgbench/pastes/wrap.py made them) -----------------

STEP_KEYS = ("workload", "status", "metrics", "params", "series", "error", "warnings")


def assert_same_step(pasted: dict[str, Any], recorded: dict[str, Any]) -> None:
    """The step of a wrapped paste is the recorded output's, but for a space in a statement:
    a page that broke a line at a space exactly at the text's widest column reads as a
    terminal's cut there (which keeps every character), so the space it dropped stays out."""
    statements = pasted["metrics"].get("statements", [])
    expected = recorded["metrics"].get("statements", [])
    assert [s["latency_ms"] for s in statements] == [s["latency_ms"] for s in expected]
    for got, want in zip(statements, expected, strict=True):
        assert got["sql"].replace(" ", "") == want["sql"].replace(" ", "")
        assert len(want["sql"]) - len(got["sql"]) in (0, 1), got["sql"]
    for key in STEP_KEYS:
        if key == "metrics":
            assert {**pasted[key], "statements": None} == {**recorded[key], "statements": None}
        else:
            assert pasted[key] == recorded[key], key


@pytest.mark.parametrize(
    ("name", "original", "end_ms"),
    [
        ("statements-word-wrapped-80-pg15.txt", "run-tpcb-pg15.txt", 0.218),
        ("statements-hanging-indent-80-pg15.txt", "run-tpcb-pg15.txt", 0.218),
        ("statements-folded-80-pg15.txt", "run-tpcb-pg15.txt", 0.218),
        ("statements-word-wrapped-80-retries-pg15.txt", "run-retries-pg15.txt", 0.292),
        ("statements-indented-80-pg16.txt", "run-simple-update-pg16.txt", 0.687),
        ("statements-word-wrapped-80-pg14.txt", "run-tpcb-pg14.txt", 0.652),
    ],
)
def test_a_statement_table_wrapped_at_80_columns_keeps_every_statement(
    cli: Cli, name: str, original: str, end_ms: float
):
    """Statements a page broke at a word (the rest on the next line, with or without an
    indent) or a terminal cut at column 80: each one's rest joins it, and every row after it
    is kept, END's latency (the commit's) included. The step is the recorded output's."""
    (pasted,) = with_series(cli, PASTES / name)
    (recorded,) = with_series(cli, PGBENCH / original)
    statements = pasted["metrics"]["statements"]
    assert len(statements) == len(recorded["metrics"]["statements"])
    assert (statements[-1]["sql"], statements[-1]["latency_ms"]) == ("END;", end_ms)
    assert_same_step(pasted, recorded)


PG96 = PGBENCH / "init-rate-run-pg96.txt"


@pytest.mark.parametrize(
    "path",
    [
        PG96,
        PASTES / "init-rate-run-pg96-folded-80.txt",
        PASTES / "init-rate-run-pg96-list.txt",
        PASTES / "init-rate-run-pg96-list-80.txt",
        PASTES / "init-rate-run-pg96-lstripped-80.txt",
    ],
    ids=lambda path: path.name,
)
def test_a_96_init_then_a_rate_limited_run_is_one_init_and_one_run(cli: Cli, path: Path):
    """PostgreSQL 9.6: an init without phase times, then a run with -R, -L, -P and -r (its
    "script statistics:" block), as printed, cut at 80 columns, copied from a page that showed
    the block's " - " lines as a list (a second step with no figures came of it), and with
    every line's indent lost."""
    init, run = with_series(cli, path)
    assert (init["workload"], init["status"], init["params"]["scale"]) == (
        "pgbench-init",
        "completed",
        10,
    )
    assert init["metrics"] == {"scale": 10}  # 9.6 prints no phase times: unknown, not 0
    assert (run["workload"], run["status"], run["error"]) == ("pgbench", "completed", None)
    metrics, params = run["metrics"], run["params"]
    assert (metrics["tps"], metrics["tps_including_connections"]) == (399.871234, 399.602114)
    assert (metrics["latency_avg_ms"], metrics["latency_stddev_ms"]) == (2.576, 1.299)
    assert (metrics["transactions"], metrics["skipped"], metrics["late"]) == (3997, 3, 21)
    assert (metrics["schedule_lag_avg_ms"], metrics["schedule_lag_max_ms"]) == (0.425, 9.876)
    assert (params["mode"], params["clients"], params["jobs"], params["scale"]) == (
        "tpcb-like",
        4,
        2,
        10,
    )
    assert (params["rate"], params["latency_limit_ms"], params["duration_s"]) == (400.0, 10.0, 10)
    statements = metrics["statements"]
    assert len(statements) == 11
    assert statements[-1] == {"sql": "END;", "latency_ms": 0.361}
    assert [t for t, _ in run["series"]["tps"]] == [2.0, 4.0, 6.0, 8.0, 10.0]
    if path != PG96:
        for pasted, recorded in zip((init, run), with_series(cli, PG96), strict=True):
            assert_same_step(pasted, recorded)
