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
        with pytest.raises(SystemExit) as exited:
            main(list(args))
        captured = capsys.readouterr()
        return int(exited.value.code or 0), captured.out, captured.err

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
    (curve,) = rate_curves(run)
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
