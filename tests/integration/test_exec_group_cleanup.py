"""A howfast killed with SIGKILL while an exec event's command runs: the command's process
group (the command and what it started) runs on, and `howfast cleanup`'s removal of that
run's private directory stops it, found by the group's record (targets/leftovers/
exec_groups.py). The leftovers are found and removed by cleanup's own code (read_snapshot,
find, remove), limited to this run's: other sessions' runs share this machine, and
`cleanup --local --yes` would take theirs too."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from howfast.targets.leftovers import names
from howfast.targets.leftovers.exec_groups import PREFIX
from howfast.targets.leftovers.find import GONE, candidate_directories, find
from howfast.targets.leftovers.machine import read_snapshot
from howfast.targets.leftovers.remove import remove
from tests.conftest import PgServer
from tests.integration.conftest import Howfast
from tests.pgprocess import alive

pytestmark = pytest.mark.integration

PLAN = """
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
duration = "30s"
rate = 50  # it only holds the run while the event's command runs; not flat out
"""


def _wait(condition, within_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_cleanup_stops_the_exec_group_a_killed_run_left(
    howfast: Howfast, pg_server: PgServer, tmp_path: Path
):
    pidfile = tmp_path / "grandchild.pid"
    command = f'sleep 38 & echo $! > "{pidfile}"; sleep 39'
    proc = howfast.popen(
        "run", str(howfast.plan(PLAN)), "--target", pg_server.dsn, "--yes",
        "--event", f"1s:exec=sh -c '{command}'",
    )  # fmt: skip
    _wait(lambda: pidfile.exists() and pidfile.read_text().strip(), 120, "the event never ran")
    grandchild = int(pidfile.read_text())
    (work_root,) = Path("/dev/shm").glob(f"howfast-work-{proc.pid}-*")
    # howfast records the group once its command has started: the command may run first
    # (seen in a loaded full run: no record yet when the grandchild's PID was written)
    _wait(lambda: list(work_root.rglob(f"{PREFIX}*")), 30, "the group was never recorded")
    (record,) = work_root.rglob(f"{PREFIX}*")
    leader = int(record.name.removeprefix(PREFIX))

    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert alive(grandchild) and alive(leader)  # nothing stopped them

    snapshot = read_snapshot(candidate_directories)
    ours = [
        x
        for x in find(snapshot)
        if x.path == str(work_root)
        or any(a.path and names.is_within(a.path, str(work_root)) for a in x.actions)
    ]
    (private,) = [x for x in ours if x.kind == "private directory"]
    assert private.state == GONE and private.actions[0].op == "stop-exec-groups"
    remove(ours)
    assert all(x.removed for x in ours), [(x.kind, x.path, x.error) for x in ours]
    _wait(lambda: not alive(grandchild) and not alive(leader), 10, "the group outlived cleanup")
    assert not work_root.exists()
