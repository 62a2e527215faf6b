"""Two lanes of lab tests on one lab (scripts/test.sh): the tests that mostly wait on the
CloudNativePG operator or on an in-cluster Job (test_cnpg*.py, test_in_cluster.py) in a pytest
session of their own, beside the other lab tests, so that the lab's session, the suite's
critical path, is not the sum of both. Without $HOWFAST_K8S_LAB_LANE (`make k8s-lab`, a
plain `pytest -m k8s`) there is one session and nothing here changes anything.

- The "owner" lane runs the lab as a single session does: it starts it, says so in the
  lanes' directory ($HOWFAST_K8S_LAB_LANES_DIR: `ready`, or `unavailable` with the reason),
  and before taking it down waits until the "guest" lane has let go of its lock there.
- The "guest" lane waits for `ready`, uses the lab and never takes it down; it holds a shared
  lock on `guest.lock` while it runs (the kernel lets go of it however the lane ends).
- Each lane looks only at its own namespaces: the guest at `lab` (lab/pg's, and where its
  howfast runs make their objects: its kubeconfig's namespace), the owner at every other
  one. What the two check of leftovers and what their `cleanup` runs see stay apart, so
  that one lane's live run is never another's leftover.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

LANE_ENV = "HOWFAST_K8S_LAB_LANE"
LANES_DIR_ENV = "HOWFAST_K8S_LAB_LANES_DIR"
GUEST, OWNER = "guest", "owner"
GUEST_NAMESPACE = "lab"  # tests/k8s/lab/cnpg.py's CLUSTER_NAMESPACE: lab/pg's
OWNER_NAMESPACE = "default"  # where the owner lane's howfast runs make their objects
READY_WAIT_S = 900.0  # the owner's lab start, after test.sh's build, on a loaded machine
PEERS_WAIT_S = 1800.0

_held: list[int] = []  # the guest lane's open lock file, held until the process ends


def lane() -> str:
    """This session's lane: "owner", "guest", or "" when it is the only one."""
    return os.environ.get(LANE_ENV, "")


def _dir() -> Path:
    return Path(os.environ[LANES_DIR_ENV])


def sees_namespace(namespace: str | None) -> bool:
    """Whether this lane looks at an object of that namespace (None: cluster-wide)."""
    if lane() == GUEST:
        return namespace == GUEST_NAMESPACE
    if lane() == OWNER:
        return namespace != GUEST_NAMESPACE
    return True


def sees_volume(pv: dict[str, Any]) -> bool:
    """A volume belongs to the lane of its claim's namespace; one without a claim, to both."""
    ref = pv.get("spec", {}).get("claimRef") or {}
    return "namespace" not in ref or sees_namespace(ref["namespace"])


def namespace_args() -> list[str]:
    """kubectl's namespace arguments for howfast's objects: every namespace, or the lane's."""
    scope = {GUEST: GUEST_NAMESPACE, OWNER: OWNER_NAMESPACE}.get(lane())
    return ["-n", scope] if scope else ["-A"]


def cleanup_scope() -> list[str]:
    """`howfast cleanup --k8s` arguments: every namespace, or the lane's own."""
    args = namespace_args()
    return ["--namespace", args[1]] if args[0] == "-n" else []


def announce(ready: bool, reason: str = "") -> None:
    """The owner lane: the lab is up (or cannot be, and why)."""
    if lane() != OWNER:
        return
    name = "ready" if ready else "unavailable"
    (_dir() / name).write_text(json.dumps({"reason": reason}) + "\n")


def wait_for_owner() -> str | None:
    """The guest lane: wait until the owner lane has the lab up; None, or why it cannot be."""
    deadline = time.monotonic() + READY_WAIT_S
    while time.monotonic() < deadline:
        if (_dir() / "ready").exists():
            return None
        unavailable = _dir() / "unavailable"
        if unavailable.exists():
            return str(json.loads(unavailable.read_text())["reason"])
        time.sleep(1)
    raise AssertionError(f"the owner lab lane did not start the lab within {READY_WAIT_S:g} s")


def hold_while_running() -> None:
    """The guest lane: a shared lock on guest.lock for as long as this process lives."""
    if lane() != GUEST or _held:
        return
    fd = os.open(_dir() / "guest.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    _held.append(fd)


def wait_for_peers(log: Any = print) -> None:
    """The owner lane, before the lab goes down: until no guest lane holds its lock."""
    if lane() != OWNER:
        return
    fd = os.open(_dir() / "guest.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + PEERS_WAIT_S
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"the guest lab lane still ran {PEERS_WAIT_S:g} s later"
                    ) from None
                if not said:
                    log("waiting for the guest lab lane to end before the lab goes down")
                    said = True
                time.sleep(1)
    finally:
        os.close(fd)
