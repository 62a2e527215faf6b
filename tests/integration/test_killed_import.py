"""An `import` killed with SIGKILL while it stores its steps (issue 26, item 13): like a killed
run, the next command marks its run aborted, and `results delete` removes it; a stuck run
whose writer cannot be told (an import stored by a howfast that did not record it) goes with
`results delete --force`."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from tests.integration.conftest import Howfast

pytestmark = pytest.mark.integration

ONE_RUN = Path(__file__).parent.parent / "data" / "pgbench" / "run-select-only-pg15.txt"
RUNS = 1500  # each run of the text is one step, committed one at a time: seconds to store


def running_runs(store: Path, *, with_steps: bool = False) -> list[int]:
    """The ids of the runs marked running (`with_steps`: that have stored a step), read
    directly (a howfast command would close the abandoned ones as it opens the store)."""
    if not store.exists():
        return []
    query = "SELECT id FROM runs WHERE status = 'running'"
    if with_steps:
        query += " AND EXISTS (SELECT 1 FROM steps WHERE steps.run_id = runs.id)"
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5) as db:
            rows = db.execute(query).fetchall()
    except sqlite3.OperationalError:  # the store is being created
        return []
    return [int(row[0]) for row in rows]


def killed_import(howfast: Howfast) -> tuple[int, int]:
    """(run id, PID) of an import SIGKILLed while it was storing its steps."""
    paste = howfast.workdir / "many-runs.txt"
    paste.write_text((ONE_RUN.read_text() + "\n") * RUNS)
    proc = howfast.popen("import", "pgbench", str(paste))
    deadline = time.monotonic() + 120
    while not running_runs(howfast.store, with_steps=True) and proc.poll() is None:
        assert time.monotonic() < deadline, "the import stored no run"
        time.sleep(0.02)
    proc.kill()
    proc.communicate(timeout=30)
    assert proc.returncode == -9, "the import ended before it could be killed: give it more runs"
    (run_id,) = running_runs(howfast.store)
    return run_id, proc.pid


def test_a_sigkilled_import_is_marked_aborted_and_can_be_deleted(howfast: Howfast):
    run_id, pid = killed_import(howfast)
    listed = howfast("results", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(r["id"], r["status"]) for r in json.loads(listed.stdout)] == [(str(run_id), "aborted")]
    assert f"run {run_id} was still marked running" in listed.stderr
    assert f"(PID {pid}) is gone" in listed.stderr
    shown = json.loads(howfast("results", "show", str(run_id), "--json").stdout)
    assert 0 < len(shown["steps"]) < RUNS  # the steps it stored are kept
    assert {s["status"] for s in shown["steps"]} == {"completed"}
    deleted = howfast("results", "delete", str(run_id))
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(howfast("results", "list", "--json").stdout) == []


def test_a_stuck_run_whose_writer_is_unknown_goes_with_force(howfast: Howfast):
    """Imports stored by howfast before this fix recorded no writer: nothing can tell that
    their process is gone. The killed import's writer is erased to make one such run."""
    run_id, _ = killed_import(howfast)
    with sqlite3.connect(howfast.store) as db:
        db.execute("UPDATE runs SET writer = NULL WHERE id = ?", (run_id,))
    refused = howfast("results", "delete", str(run_id))
    assert refused.returncode == 2
    assert "does not say which process writes it" in refused.stderr
    assert "--force" in refused.stderr  # the way out is named
    assert running_runs(howfast.store) == [run_id]
    forced = howfast("results", "delete", str(run_id), "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"deleted run {run_id}" in forced.stderr
    assert json.loads(howfast("results", "list", "--json").stdout) == []


def test_force_does_not_delete_a_run_whose_howfast_is_alive(howfast: Howfast):
    """--force is for runs nothing can vouch for; a live writer here would fail at its next
    write, so it is still refused with its PID."""
    paste = howfast.workdir / "many-runs.txt"
    paste.write_text((ONE_RUN.read_text() + "\n") * RUNS)
    proc = howfast.popen("import", "pgbench", str(paste))
    try:
        deadline = time.monotonic() + 120
        while not running_runs(howfast.store) and proc.poll() is None:
            assert time.monotonic() < deadline, "the import stored no run"
            time.sleep(0.02)
        proc.send_signal(signal.SIGSTOP)  # alive, and still writing its run when it resumes
        (run_id,) = running_runs(howfast.store)
        refused = howfast("results", "delete", str(run_id), "--force")
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert refused.returncode == 2, refused.stderr
    assert f"run {run_id} is still running (howfast PID {proc.pid})" in refused.stderr
