"""store/run_list.py: `results list` of an up-to-date SQLite file read with sqlite3 alone, on
real SQLite stores made by SqlStore; it lists exactly what SqlStore.list_runs lists, and
leaves every other case (answering None) to the usual way, which tests here check still
happens through `howfast results list`."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from howfast.cli import main
from howfast.cli.context import CliEnv
from howfast.model import StepRecord, TargetRecord
from howfast.store import SqlStore, engine, migrations, open_store, run_list
from howfast.store.liveness import this_process
from howfast.store.location import ENV_VAR, plain_sqlite_file, resolve_store_location


def step(target: str) -> StepRecord:
    return StepRecord(
        target=target,
        workload="pgbench",
        params={"mode": "select-only", "clients": 1},
        status="completed",
        started_at="2026-01-01T00:00:00+00:00",
        finished_at="2026-01-01T00:00:10+00:00",
        metrics={"tps": 500.0},
    )


def filled(path: Path) -> Path:
    """Runs of 0, 1 and 2 targets, with and without label and steps, two starting at once."""
    with open_store(str(path)) as db:
        assert isinstance(db, SqlStore)
        empty = db.create_run("quick", {}, "2026-01-02T00:00:00+00:00")
        db.finish_run(empty, "failed", "2026-01-02T00:00:01+00:00")
        for label, targets in (("one", ["/mnt/a"]), ("two", ["/mnt/b", "/mnt/a"])):
            run_id = db.create_run("sweep", {}, "2026-01-01T00:00:00+00:00", label)
            for name in targets:
                db.add_target(run_id, TargetRecord(name, "local", "16.4", {}, {}, name))
                db.add_step(run_id, step(name))
                db.add_step(run_id, step(name))
            db.finish_run(run_id, "completed", "2026-01-01T00:01:00+00:00")
    return path


def stored_list(path: Path) -> list[object]:
    with open_store(str(path)) as db:
        return list(db.list_runs())


def test_its_constants_are_the_stores() -> None:
    assert run_list.SCHEMA_VERSION == migrations.SCHEMA_VERSION
    assert run_list.SQLITE_BUSY_TIMEOUT_S == engine.SQLITE_BUSY_TIMEOUT_S


def test_it_lists_what_the_store_lists(tmp_path: Path) -> None:
    path = filled(tmp_path / "r.db")
    listed = run_list.list_runs(path)
    assert listed is not None
    assert listed == stored_list(path)
    # newest first; ties: last created first; targets in their order
    assert [(r.label, r.targets, r.step_count) for r in listed] == [
        (None, (), 0),
        ("two", ("/mnt/b", "/mnt/a"), 4),
        ("one", ("/mnt/a",), 2),
    ]


def test_a_store_it_cannot_answer_for_is_left_to_the_usual_way(tmp_path: Path) -> None:
    assert run_list.list_runs(tmp_path / "missing.db") is None
    assert not (tmp_path / "missing.db").exists()  # nor created
    not_sqlite = tmp_path / "notes.db"
    not_sqlite.write_text("not a database\n" * 100)
    assert run_list.list_runs(not_sqlite) is None
    older = filled(tmp_path / "older.db")
    with sqlite3.connect(older) as db:
        db.execute("UPDATE schema_version SET version = version - 1")
    assert run_list.list_runs(older) is None
    running = filled(tmp_path / "running.db")
    with open_store(str(running)) as store:
        store.create_run("quick", {}, "2026-01-03T00:00:00+00:00", writer=this_process().document())
    assert run_list.list_runs(running) is None


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_results_list_still_closes_a_killed_run(tmp_path: Path) -> None:
    path = filled(tmp_path / "r.db")
    gone = replace(this_process(), pid=dead_pid())
    with open_store(str(path)) as store:
        killed = store.create_run("quick", {}, "2026-01-03T00:00:00+00:00", writer=gone.document())
    stdout, stderr = io.StringIO(), io.StringIO()
    assert main(["results", "list", "--json", "--store", str(path)], CliEnv(stdout, stderr)) == 0
    assert f"run {killed} was still marked running" in stderr.getvalue()
    listed = json.loads(stdout.getvalue())
    assert (listed[0]["id"], listed[0]["status"]) == (str(killed), "aborted")
    # the next listing, with no run marked running, is the quick one, and says the same
    assert run_list.list_runs(path) == stored_list(path)


@pytest.mark.parametrize(
    "given", ["plain", "env", "default-there", "sqlite-url", "missing", "default-not-there"]
)
def test_the_plain_file_is_the_one_the_store_resolves_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    if given == "default-there":
        (tmp_path / "data" / "howfast").mkdir(parents=True)
        path = filled(tmp_path / "data" / "howfast" / "howfast.db")
    else:
        path = filled(tmp_path / "r.db")
    url, environ = {
        "plain": (str(path), {}),
        "env": (None, {ENV_VAR: f" {path} "}),
        "sqlite-url": (f"sqlite:///{path}", {}),
        "missing": (str(tmp_path / "missing.db"), {}),
        "default-there": (None, {}),
        "default-not-there": (None, {}),
    }[given]
    found = plain_sqlite_file(url, environ)
    resolved = resolve_store_location(url, environ)
    if given in ("plain", "env", "default-there"):
        assert found == resolved.sqlite_path == path
    else:  # a URL, or a file not there yet (the default one included): the usual way
        assert found is None
