"""Issue 29's pod events on the lab: `delete-pod` (the server's pod deleted and made again on
its claims) and `move` (made again on the other node) during a pgbench step, with the load in
a client pod that reconnects; what cannot apply is refused before anything starts; Ctrl-C in
the middle of a move leaves nothing. On the lab's pod network (the client pod dials the
primary by its DNS name, which follows the pod made again), the StorageClass whose volumes
both nodes mount (lab-shared)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from howfast.analysis.loadrecord import LoadRecord
from howfast.store import open_store
from tests.k8s import lanes
from tests.k8s.conftest import (
    LABEL,
    Kube,
    TwoNodes,
    assert_clean,
    lab_images,
    leftovers,
    reap,
    run_howfast,
    write_plan,
)
from tests.k8s.lab.cluster import ClusterFacts

pytestmark = pytest.mark.k8s

PLAN = """
description = "pod events"
[settings]
shared_buffers = "32MB"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [2]
duration = "DURATION"
"""


# the events test's step, and how long before its end the server must answer for the load to
# have reconnected: the client pod's connect timeout (5 s) to the old pod's address, and the
# next connect's
STEP_S = 70
RECONNECT_S = 12


def _plan(tmp_path: Path, duration: str) -> str:
    return write_plan(tmp_path, PLAN.replace("DURATION", duration))


def _load_end_s(env: dict[str, str], run_id: int) -> float:
    """When the step's load ended, on the events' clock, from the run's stored load record."""
    run = open_store(env["HOWFAST_STORE"], reading=True).get_run(run_id)
    assert run is not None
    (step,) = [s for s in run.steps if "load" in s.sections]
    return LoadRecord.from_document(step.sections["load"]).end_s


def _events(doc: dict[str, Any]) -> list[dict[str, Any]]:
    (step,) = [s for s in doc["steps"] if s["workload"] == "pgbench"]
    assert step["status"] == "completed", step.get("error")
    events: list[dict[str, Any]] = step["events"]
    return events


def test_delete_pod_move_and_drain_during_the_load_lose_no_commit(
    k8s_lab: ClusterFacts,
    kube: Kube,
    two_nodes: TwoNodes,
    howfast_env: dict[str, str],
    tmp_path: Path,
) -> None:
    """One 70 s step: the server's pod deleted at 4 s, moved to the other node at 20 s, and
    that node drained at 36 s for 4 s (the pod evicted back to the first node; the client pod
    kept off the drained node from the start). Each event verified (a new pod and server, the
    rows there), with downtime, and no acknowledged commit lost; the drained node takes pods
    again after, without howfast's annotation."""
    # Each event's outage, as the load sees it, must end before the next event and the last
    # one's before the step's end. It can outlast the pod's return by up to the client pod's
    # connect timeout (PGCONNECT_TIMEOUT, 5 s): the headless Service still publishes the old
    # pod's address while it terminates, after its network is gone, and a connect there is
    # never answered. Seen on this loaded machine with events 10 s apart in a 32 s step: a
    # drain applied at 24.9 s, its new pod answering at 29.4 s, the load's connect to the old
    # address from 26.5 s to 31.6 s, then the step's end: no commit after the drain. From an
    # event's application to the load's next commit took up to 7 s there, and an application
    # came up to 1.6 s after its time. In CI (a busier machine) events 12 s apart were not
    # enough: the drain, due at 28 s, was applied at 34.1 s (the move before it still being
    # verified) and its pod answered at 49.8 s, after the 44 s step's end. So 16 s apart and
    # 34 s after the last: room for an event applied 6 s late and back 16 s after that.
    started = time.monotonic()
    out = run_howfast(
        howfast_env, "run", _plan(tmp_path, f"{STEP_S}s"), "--target", f"k8s://{two_nodes.shared_storage_class}",
        "--node", two_nodes.first, "--event", "4s:delete-pod", "--event", "20s:move",
        "--event", f"36s:drain={two_nodes.second},for=4s", "--yes",
        *lab_images(k8s_lab), "--json", timeout=280,
    )  # fmt: skip
    doc = json.loads(out.stdout)
    assert doc["status"] == "completed", out.stderr
    deleted, moved, drained = _events(doc)
    assert [e["action"] for e in (deleted, moved, drained)] == ["delete-pod", "move", "drain"]
    load_end_s = _load_end_s(howfast_env, doc["id"])
    assert load_end_s >= STEP_S - 1, load_end_s  # the load's own record of when it ended
    resumed = 0  # events after which the load's return was checked
    for event in (deleted, moved, drained):
        assert event["verified"] is True, json.dumps(event)
        evidence = event["evidence"]
        assert evidence["pod_uid_after"] != evidence["pod_uid_before"], evidence
        assert evidence["started_at_after"] > evidence["started_at_before"], evidence
        rows = (evidence["pgbench_branches_rows_before"], evidence["pgbench_branches_rows_after"])
        assert rows == (1, 1), evidence
        assert event["downtime_s"] > 0, event
        # The load came back to the new pod: its commits resumed before the load's end, when
        # the server answered early enough for the client to reconnect (RECONNECT_S). When
        # the machine was so busy that the server answered only after the load's end (CI: a
        # drain due at 36 s applied at 59.4 s, the move before it still being verified, and
        # back at 78.2 s of a 70 s step), the outage is said to last until the end. The load's
        # end is the one it recorded, not the step's 70 s: its segments' pgbench runs finish
        # the transactions under way, and restart after a lost connection (CI: a drain's
        # server back at 70.4 s, and a commit after it).
        if event["back_s"] <= load_end_s - RECONNECT_S:
            assert event["downtime_until_end"] is False, json.dumps(event)
            resumed += 1
        elif event["back_s"] >= load_end_s:
            assert event["downtime_until_end"] is True, json.dumps(event)
        assert event["lost_commits"] == 0, event
    assert resumed, "no event left the load time to come back before the step's end"
    # Back to 90% of the TPS before, or said why not. The TPS after may stay under the
    # 3 s baseline's within the seconds left: on another node after a move or drain (seen:
    # 927 -> 579 TPS on this shared machine), and even on the same node after delete-pod
    # when the other tests' load rose meanwhile (seen in a clean clone: 794 -> 544 TPS for
    # 28 s). A move's or drain's baseline starts where the previous event's recovery ended,
    # which may leave it under the 3 s needed. When not back, the load still ran after the
    # event (its commits resumed, above) at a rate of its own. An outage that lasted until
    # the end has no recovery.
    for event in (deleted, moved, drained):
        reasons: tuple[str, ...] = ("not back to 90%", "not enough seconds before the event")
        if event["downtime_until_end"]:
            reasons += ("no service until the step's end",)
        assert event["recovery_s"] is not None or str(event["recovery_note"]).startswith(reasons), (
            json.dumps(event)
        )
        if str(event["recovery_note"]).startswith("not back to 90%"):
            assert event["tps_after"] > 0, json.dumps(event)
    nodes = {
        e["action"]: (e["evidence"]["node_before"], e["evidence"]["node_after"])
        for e in (deleted, moved, drained)
    }
    # delete-pod makes the pod again from its manifest: --node keeps it on the first node
    assert nodes == {
        "delete-pod": (two_nodes.first, two_nodes.first),
        "move": (two_nodes.first, two_nodes.second),
        "drain": (two_nodes.second, two_nodes.first),
    }
    assert moved["evidence"]["node_sent_to"] == two_nodes.second
    assert drained["evidence"]["node_cordoned"] is True
    assert drained["undone_s"] is not None, drained  # uncordoned at the window's end
    node = kube.get("node", two_nodes.second)
    assert not node["spec"].get("unschedulable"), node["spec"]
    assert "howfast.dev/cordoned-by" not in node["metadata"].get("annotations", {})
    (target,) = doc["targets"]
    assert target["client"]["placement"] == "pod"
    assert target["client"]["node"] == two_nodes.first  # kept off the node drained later
    print(
        f"delete-pod: {deleted['line']}; move: {moved['line']}; drain: {drained['line']} "
        f"({time.monotonic() - started:.0f} s)"
    )
    assert_clean(kube)


def test_pod_events_that_cannot_apply_are_refused_before_anything_starts(
    k8s_lab: ClusterFacts,
    kube: Kube,
    two_nodes: TwoNodes,
    howfast_env: dict[str, str],
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path, "12s")
    shared = f"k8s://{two_nodes.shared_storage_class}"

    def refused(*args: str) -> str:
        out = run_howfast(
            howfast_env, "run", plan, "--target", shared, *lab_images(k8s_lab), *args, check=False
        )
        assert out.returncode == 2, out.stderr
        assert leftovers(kube) == {}
        return out.stderr

    # three refusals at once (each starts howfast and asks the API server: seconds each,
    # waited for in the lab session, the suite's critical path); the fourth cordons a node
    with ThreadPoolExecutor(3) as pool:
        no_node, same_pod, drain = pool.map(
            lambda args: refused(*args),
            [
                ("--event", "4s:move=no-such-node"),
                ("--event", "4s:delete-pod", "--client", "same-pod"),
                ("--event", f"4s:drain={two_nodes.first}"),
            ],
        )
    assert "a move event cannot apply: the cluster has no node no-such-node" in no_node, no_node
    assert "the load runs in the server's pod (--client same-pod), which the event" in same_pod
    assert f"drain cordons node {two_nodes.first} for the cluster's other users too" in drain
    assert "add --yes" in drain, drain
    kube("cordon", two_nodes.second)
    try:
        said = refused("--event", "4s:move")
    finally:
        kube("uncordon", two_nodes.second)
    assert (
        f"a move needs a second node that takes pods: the cluster has 1 ({two_nodes.first})"
    ) in said, said


def test_a_move_on_volumes_tied_to_their_node_fails_before_the_first_step(
    k8s_lab: ClusterFacts, kube: Kube, howfast_env: dict[str, str], tmp_path: Path
) -> None:
    """lab-disk's volumes get a node affinity when they are made: known once the claim is
    bound, when the server's pod runs; the run stops there, with the reason, and leaves
    nothing."""
    out = run_howfast(
        howfast_env, "run", _plan(tmp_path, "12s"), "--target", "k8s://lab-disk",
        "--event", "4s:move", *lab_images(k8s_lab), "--json", check=False, timeout=200,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert [s["status"] for s in doc["steps"]] == ["failed", "failed"]
    error = doc["steps"][0]["error"]
    assert "a move event cannot apply" in error and "StorageClass lab-disk" in error, error
    assert "tied to node" in error, error
    assert_clean(kube)


def test_ctrl_c_while_the_pod_moves_leaves_nothing(
    k8s_lab: ClusterFacts,
    kube: Kube,
    two_nodes: TwoNodes,
    howfast_env: dict[str, str],
    tmp_path: Path,
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "howfast", "run", _plan(tmp_path, "30s"),
         "--target", f"k8s://{two_nodes.shared_storage_class}", "--node", two_nodes.first,
         "--event", "3s:move", *lab_images(k8s_lab)],
        env=howfast_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 150
        moving = False
        while not moving and time.monotonic() < deadline:  # the old pod going, or the new one
            assert proc.poll() is None, proc.communicate()
            for pod in kube.get(
                "pod", *lanes.namespace_args(), "-l", f"{LABEL},howfast.dev/role=primary"
            )["items"]:
                gone = pod["metadata"].get("deletionTimestamp")
                moving = moving or bool(gone) or pod["spec"].get("nodeName") == two_nodes.second
            time.sleep(0.2)
        assert moving, "the server's pod was not moved within 150 s"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=180)
    finally:
        reap(proc)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    assert_clean(kube)
