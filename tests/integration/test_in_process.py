"""Commands that measure, run in-process (`main(args, env)`) with an environment of the test's
own: a real throwaway cluster, real pgbench, the test's streams, store and clock. A run driven
off the main thread has no signal handlers: it is stopped through the environment's
CancelToken, and cleans up as on Ctrl-C."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path

import pytest

from howfast.cancel import CancelToken
from howfast.cli import main
from howfast.cli.context import CliEnv
from tests.integration.conftest import postgres_pids_under

pytestmark = pytest.mark.integration

FIXED = "2030-01-02T03:04:05.000+00:00"
PLAN = """
[settings]
shared_buffers = "32MB"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
duration = "{duration}"
"""


class FixedClock:
    def now(self) -> str:
        return FIXED


def environment(store: Path, **more: object) -> CliEnv:
    return CliEnv(
        stdout=io.StringIO(),
        stderr=io.StringIO(),
        environ={},
        store_url=str(store),
        terminal=False,
        **more,  # type: ignore[arg-type]
    )


def text(stream: object) -> str:
    assert isinstance(stream, io.StringIO)
    return stream.getvalue()


def test_run_then_results_in_process(
    tmp_path: Path, target_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "tiny.toml"
    plan.write_text(PLAN.format(duration="1s") + "rate = 500\n")  # statuses, not throughput
    store = tmp_path / "results.db"
    env = environment(store, clock=FixedClock())
    status = main(["run", str(plan), "--target", str(target_dir), "--json"], env)
    assert status == 0, text(env.stderr)
    run = json.loads(text(env.stdout))  # exactly one JSON document
    assert run["status"] == "completed"
    assert [s["status"] for s in run["steps"]] == ["completed", "completed"]
    assert run["steps"][1]["metrics"]["tps"] > 0
    # stored timestamps are the environment clock's; the store is the environment's
    assert run["started_at"] == run["finished_at"] == FIXED
    assert {s["started_at"] for s in run["steps"]} == {s["finished_at"] for s in run["steps"]}
    assert {s["started_at"] for s in run["steps"]} == {FIXED}
    said = text(env.stderr)
    assert f"run {run['id']}: 2 steps on 1 target(s)" in said
    assert f"run {run['id']} completed" in said
    assert list(target_dir.iterdir()) == [] and postgres_pids_under(target_dir) == []

    shown = environment(store)
    assert main(["results", "show", run["id"], "--json"], shown) == 0
    assert json.loads(text(shown.stdout))["steps"][1]["metrics"] == run["steps"][1]["metrics"]
    table = environment(store)
    assert main(["results", "show", run["id"]], table) == 0
    assert str(target_dir) in text(table.stdout) and "select-only" in text(table.stdout)
    assert capsys.readouterr() == ("", "")  # nothing on this process's own streams


def test_doctor_in_process_names_the_environment_store(tmp_path: Path) -> None:
    env = environment(tmp_path / "mine.db")
    status = main(["doctor", "--json"], env)
    doc = json.loads(text(env.stdout))
    assert doc["store"] == str(tmp_path / "mine.db")
    assert status == (0 if doc["ok"] else 1)
    assert {"pgbench", "fio"} <= {c["name"] for c in doc["checks"]}


def test_a_run_off_the_main_thread_stops_when_its_token_is_cancelled(
    tmp_path: Path, target_dir: Path
) -> None:
    plan = tmp_path / "long.toml"
    # rate: the step only holds the run while the test interrupts it; not flat out
    plan.write_text(PLAN.format(duration="60s") + "rate = 50\n")
    store = tmp_path / "results.db"
    cancel = CancelToken()
    env = environment(store, cancel=cancel)
    ended: list[int] = []
    worker = threading.Thread(
        target=lambda: ended.append(main(["run", str(plan), "--target", str(target_dir)], env)),
        name="howfast-in-process",
    )
    worker.start()
    deadline = time.monotonic() + 120
    while "[2/2]" not in text(env.stderr) and worker.is_alive():
        assert time.monotonic() < deadline, text(env.stderr)
        time.sleep(0.2)
    time.sleep(1)  # pgbench is measuring
    began = time.monotonic()
    cancel.cancel("SIGINT")
    worker.join(60)
    assert not worker.is_alive(), text(env.stderr)
    assert time.monotonic() - began < 30  # not the 60 s the step asked for
    assert ended == [130], text(env.stderr)
    assert "SIGINT: stopping, the completed steps are kept" in text(env.stderr)
    shown = environment(store)
    assert main(["results", "show", "1", "--json"], shown) == 0
    run = json.loads(text(shown.stdout))
    assert run["status"] == "aborted"
    assert run["steps"][0]["status"] == "completed"  # the load, kept
    assert list(target_dir.iterdir()) == [] and postgres_pids_under(target_dir) == []
