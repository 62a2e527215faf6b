"""What a run says of its events while it runs and what it records agree (issue 35): a
restart of a primary with an asynchronous standby was shown live as "service back after
5.42 s" (the restart's wait for the standby to stream again) while the step recorded 0.34 s
without service (the load's commits). The live view now prints each event's recorded line
once the step ended, and the action's `back_s` is when the server answered, the standby's
wait apart in its facts."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from howfast.event_marks import marks_from_section
from howfast.store import open_store
from tests.integration.conftest import TINY_PLAN, Howfast, postgres_pids_under

pytestmark = pytest.mark.integration

PLAN = TINY_PLAN.replace(
    'modes = ["select-only", "tpcb-like", "simple-update"]', 'modes = ["tpcb-like"]'
)
PLAN = PLAN.replace("clients = [2]", "clients = [1]").replace('duration = "1s"', 'duration = "8s"')


def test_a_restart_with_a_standby_is_shown_live_as_it_is_recorded(
    howfast: Howfast, target_dir: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the servers run as their own OS user")
    plan = howfast.plan(PLAN)
    out = howfast("run", str(plan), "--target", str(target_dir), "--replicas", "1",
                  "--sync", "off", "--event", "2s:restart", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    (step,) = [s for s in doc["steps"] if s["workload"] == "pgbench"]
    assert step["status"] == "completed", step["error"]
    (restart,) = step["events"]
    assert restart["verified"] is True, restart["problem"]
    # the standby's wait is a fact of its own, not part of the time the server was away
    store = open_store(str(howfast.store), reading=True)
    run = store.get_run(doc["id"])
    assert run is not None
    (stored,) = [s for s in run.steps if s.workload == "pgbench"]
    (mark,) = marks_from_section(stored.sections["events"])
    waited = mark.facts["standbys_streaming_s"]
    assert isinstance(waited, float) and waited >= 0
    assert mark.applied_s is not None and mark.back_s is not None
    assert mark.applied_s <= mark.back_s == restart["back_s"]
    # live: the applied line without a figure of the outage, then, after the step, the very
    # line that is recorded (and that `results show` prints)
    said = " ".join(out.stderr.split())  # the console wraps long lines
    assert re.search(r"\d+ s: 2s:restart applied \(verified\)", said), said
    assert "service back after" not in said
    assert f"event: {restart['line']}" in said
    assert restart["line"].startswith("restart at 2 s: ")
    shown = howfast("results", "show", str(doc["id"]))
    assert shown.returncode == 0, shown.stderr
    assert restart["line"] in " ".join(shown.stdout.split())
    assert postgres_pids_under(target_dir) == []
