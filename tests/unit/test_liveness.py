"""Runs whose howfast process was killed: telling a gone writer from a live one, and closing
those runs in a real SQLite store."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

from howfast.model import StepRecord
from howfast.store import SqlStore, open_store
from howfast.store.liveness import (
    Writer,
    close_abandoned_runs,
    is_gone,
    process_start_ticks,
    start_ticks_from_stat,
    this_process,
)

# A /proc/PID/stat line whose command name holds a space and a ')'.
STAT = (
    "4242 (my )prog) S 1 4242 4242 0 -1 4194560 1000 0 0 0 12 3 0 0 20 0 1 0 987654 "
    "12345678 1000 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0"
)


def dead_pid() -> int:
    """The PID of a child that has exited and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_start_time_is_field_22_even_with_parentheses_in_the_name():
    assert start_ticks_from_stat(STAT) == 987654


def test_this_process_is_alive_and_its_start_time_matches_proc():
    here = this_process()
    assert here.pid == os.getpid()
    assert here.start_ticks == process_start_ticks(os.getpid())
    assert here.boot_id and len(here.boot_id) == 36
    assert not is_gone(here, here)


def test_an_exited_pid_on_this_host_is_gone():
    here = this_process()
    assert is_gone(replace(here, pid=dead_pid()), here)


def test_a_reused_pid_is_gone_when_its_start_time_differs():
    here = this_process()
    assert here.start_ticks is not None
    assert is_gone(replace(here, start_ticks=here.start_ticks - 1), here)


def test_another_boot_is_gone_even_if_the_pid_exists():
    here = this_process()
    assert is_gone(replace(here, boot_id="00000000-0000-0000-0000-000000000000"), here)


def test_another_host_container_or_no_boot_id_cannot_be_judged():
    here = this_process()
    assert here.pid_ns and here.pid_ns.startswith("pid:[")
    assert not is_gone(replace(here, host="elsewhere", pid=dead_pid()), here)
    assert not is_gone(replace(here, pid_ns="pid:[1]", pid=dead_pid()), here)
    assert not is_gone(replace(here, boot_id=None, pid=dead_pid()), here)


def test_writer_document_round_trip_and_bad_documents():
    here = this_process()
    assert Writer.from_document(here.document()) == here
    assert Writer.from_document(None) is None
    assert Writer.from_document({"host": "h"}) is None
    assert Writer.from_document({"host": "h", "pid": "12"}) is None


def _step(finished_at: str) -> StepRecord:
    return StepRecord(
        target="t",
        workload="pgbench-init",
        params={"scale": 1},
        status="completed",
        started_at="2026-11-22T10:00:00+00:00",
        finished_at=finished_at,
        metrics={"init_total_s": 1.0},
    )


def test_only_runs_whose_writer_is_gone_are_closed(tmp_path: Path):
    here = this_process()
    gone = replace(here, pid=dead_pid())
    with open_store(str(tmp_path / "r.db")) as store:
        assert isinstance(store, SqlStore)
        killed = store.create_run("quick", {}, "2026-11-22T10:00:00+00:00", writer=gone.document())
        store.add_step(killed, _step("2026-11-22T10:00:05+00:00"))
        store.add_step(killed, _step("2026-11-22T10:00:09+00:00"))
        empty_killed = store.create_run(
            "quick", {}, "2026-11-22T11:00:00+00:00", writer=gone.document()
        )
        live = store.create_run("quick", {}, "2026-11-22T12:00:00+00:00", writer=here.document())
        foreign = store.create_run(
            "quick", {}, "2026-11-22T13:00:00+00:00", writer=replace(gone, host="x").document()
        )
        old = store.create_run("quick", {}, "2026-11-22T14:00:00+00:00")  # before schema v3
        done = store.create_run("quick", {}, "2026-11-22T15:00:00+00:00", writer=gone.document())
        store.finish_run(done, "completed", "2026-11-22T15:00:01+00:00")

        closed = close_abandoned_runs(store, here)

        assert sorted(c.run_id for c in closed) == [killed, empty_killed]
        assert all(c.writer.pid == gone.pid for c in closed)
        status = {r.id: (r.status, r.finished_at) for r in store.list_runs()}
        # Finished when its last stored step finished; with no step, when it started.
        assert status[killed] == ("aborted", "2026-11-22T10:00:09+00:00")
        assert status[empty_killed] == ("aborted", "2026-11-22T11:00:00+00:00")
        assert status[live][0] == status[foreign][0] == status[old][0] == "running"
        assert status[done] == ("completed", "2026-11-22T15:00:01+00:00")
        run = store.get_run(killed)
        assert run is not None and len(run.steps) == 2
        # A second look finds nothing more to close.
        assert close_abandoned_runs(store, here) == []
