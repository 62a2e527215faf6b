"""The smaller commands, run as a user would: plans, results, import, doctor."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from howfast.plans import load_plan
from tests.integration.conftest import Howfast

DATA = Path(__file__).parent.parent / "data" / "pgbench"


def test_plans_lists_and_prints_builtins(howfast: Howfast, tmp_path: Path):
    listing = howfast("plans")
    assert listing.returncode == 0
    assert "quick" in listing.stdout and "sweep" in listing.stdout
    text = howfast("plans", "quick").stdout
    tomllib.loads(text)  # valid TOML, ready to edit
    copy = tmp_path / "mine.toml"
    copy.write_text(text)
    mine, builtin = load_plan(str(copy)), load_plan("quick")
    assert mine.name == "mine"  # a plan file is named after itself
    assert (mine.steps, mine.settings, mine.repeat) == (builtin.steps, builtin.settings, 1)
    unknown = howfast("plans", "nope")
    assert unknown.returncode == 2 and "quick" in unknown.stderr


def test_results_on_empty_store_and_bad_ids(howfast: Howfast):
    out = howfast("results", "list", "--json")
    assert out.returncode == 0 and json.loads(out.stdout) == []
    missing = howfast("results", "show", "42")
    assert missing.returncode == 2 and "no run 42" in missing.stderr
    bad = howfast("results", "show", "abc")
    assert bad.returncode == 2 and "not a run id" in bad.stderr
    assert howfast("results", "delete", "42").returncode == 2


def test_import_pgbench_from_file_and_stdin_then_delete(howfast: Howfast):
    sample = DATA / "run-tpcb-pg15.txt"
    out = howfast("import", "pgbench", str(sample), "--label", "longhorn 3 replicas", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["label"] == "longhorn 3 replicas" and doc["plan"] == "import"
    step = doc["steps"][-1]
    assert step["workload"] == "pgbench" and step["params"]["mode"] == "tpcb-like"
    assert step["params"]["clients"] >= 1 and step["metrics"]["tps"] > 0
    piped = howfast("import", "pgbench", "-", "--json", input=sample.read_text())
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["steps"][-1]["metrics"] == step["metrics"]
    listed = json.loads(howfast("results", "list", "--json").stdout)
    assert [r["id"] for r in listed] == ["2", "1"]  # newest first
    assert howfast("results", "delete", "1").returncode == 0
    assert [r["id"] for r in json.loads(howfast("results", "list", "--json").stdout)] == ["2"]


def test_import_rejects_text_without_pgbench_output(howfast: Howfast):
    out = howfast("import", "pgbench", "-", input="hello\nworld\n")
    assert out.returncode == 2 and "no pgbench output" in out.stderr
    missing = howfast("import", "pgbench", "/nonexistent/file.txt")
    assert missing.returncode == 2 and "no such file" in missing.stderr


@pytest.mark.integration
def test_doctor_reports_tools_and_capabilities(howfast: Howfast):
    out = howfast("doctor", "--json")
    doc = json.loads(out.stdout)
    names = {c["name"] for c in doc["checks"]}
    assert {"pgbench", "fio", "loop devices", "drop_caches"} <= names
    assert any(n.startswith("postgresql ") for n in names)
    pgbench = next(c for c in doc["checks"] if c["name"] == "pgbench")
    assert out.returncode == (0 if pgbench["ok"] else 1)
    missing = [c for c in doc["checks"] if not c["ok"]]
    assert all(c["disables"] for c in missing), "each missing piece says what it disables"
    table = howfast("doctor")
    assert "pgbench" in table.stdout and "results store" in table.stdout


def test_store_without_its_version_row_is_left_alone(howfast: Howfast):
    import sqlite3

    assert howfast("results", "list").returncode == 0  # creates the store
    with sqlite3.connect(howfast.store) as db:
        db.execute("DELETE FROM schema_version")
        before = db.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall()
    out = howfast("results", "list")
    assert out.returncode == 1
    assert "duplicate column" not in out.stderr
    assert "no version row" in out.stderr and "will not touch it" in out.stderr
    assert str(howfast.store) in out.stderr and "INSERT INTO schema_version" in out.stderr
    with sqlite3.connect(howfast.store) as db:
        assert db.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall() == before
        assert db.execute("SELECT count(*) FROM schema_version").fetchone() == (0,)
