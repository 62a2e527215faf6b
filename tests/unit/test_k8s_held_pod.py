"""A server pod made ahead (issue 34: while the run's previous target measures) holds its
server until released: the manifest that says so, and the real start script run by /bin/sh
in a directory standing for the pod's mounts (nothing is written to the data directory until
the release file exists; SIGTERM while held ends it at once). initdb there is a stub that
fails: what is tested is whether the script gets to it, and no server may be left running."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from howfast.targets.k8s import manifests as m
from howfast.targets.k8s.spec import K8sOptions, parse_target

WAIT_S = 10.0  # only bounds a failure: each wait ends as soon as what it waits for happens


def _plan() -> m.Plan:
    return m.Plan(
        token="abc123",
        namespace="bench",
        spec=parse_target("k8s://fast"),
        options=K8sOptions(),
        port=5555,
        settings={},
    )


def _env(container: dict[str, object]) -> dict[str, object]:
    return {str(e["name"]): e for e in container.get("env") or []}  # type: ignore[attr-defined]


def test_a_held_pod_differs_only_by_the_servers_hold_variable() -> None:
    pod = m.pod(_plan(), {"name": "howfast-abc123", "uid": "UID"})
    held = m.held(pod)
    server, *others = held["spec"]["containers"]  # the tools (and fio's, another image)
    assert server["name"] == m.POSTGRES and others
    assert _env(server)[m.HOLD_VARIABLE] == {"name": m.HOLD_VARIABLE, "value": "1"}
    assert "HOWFAST_PASSWORD" in _env(server)  # the password still comes from the Secret
    assert all(m.HOLD_VARIABLE not in _env(c) for c in others)
    # the manifest kept (events make the pod again from it) does not hold
    assert all(m.HOLD_VARIABLE not in _env(c) for c in pod["spec"]["containers"])
    held["spec"]["containers"][0]["env"] = pod["spec"]["containers"][0]["env"]
    assert held == pod


def _script(root: Path) -> Path:
    """The ConfigMap's start script with the pod's mounts under `root`."""
    text = m.config_map(_plan(), None)["data"]["start.sh"]
    text = text.replace(m.CONFIG_MOUNT, str(root / "config")).replace(m.MOUNT_ROOT, str(root))
    for sub in ("data", "run", "config"):
        (root / sub).mkdir()
    path = root / "start.sh"
    path.write_text(text)
    return path


def _start(root: Path, held: bool) -> subprocess.Popen[bytes]:
    stubs = root / "stubs"
    stubs.mkdir()
    (stubs / "initdb").write_text("#!/bin/sh\nexit 1\n")
    (stubs / "initdb").chmod(0o755)
    env = {"PATH": f"{stubs}:{os.environ['PATH']}", "HOWFAST_PASSWORD": "secret"}
    if held:
        env[m.HOLD_VARIABLE] = "1"
    return subprocess.Popen(
        ["/bin/sh", str(_script(root))],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _until(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_the_held_server_writes_nothing_until_released(tmp_path: Path) -> None:
    proc = _start(tmp_path, held=True)
    initdb_log = tmp_path / "run" / "initdb.log"  # the first thing initdb's start writes
    try:
        time.sleep(1.0)  # ten of the hold's polls: it would have gone on by now
        assert proc.poll() is None
        assert not initdb_log.exists()
        assert not (tmp_path / "data" / "pgdata").exists()
        (tmp_path / "run" / "release").touch()
        assert _until(initdb_log.exists)  # released: initdb begins
    finally:
        proc.kill()
        proc.wait()


def test_an_unheld_server_starts_at_once(tmp_path: Path) -> None:
    proc = _start(tmp_path, held=False)
    try:
        assert _until((tmp_path / "run" / "initdb.log").exists)
    finally:
        proc.kill()
        proc.wait()


def test_a_held_server_ends_at_once_on_sigterm(tmp_path: Path) -> None:
    """A pod deleted before it was released (Ctrl-C) goes at once, not after its grace
    period: the hold traps TERM (the script is the container's PID 1, which ignores signals
    it does not trap)."""
    proc = _start(tmp_path, held=True)
    try:
        time.sleep(0.5)  # into the hold's loop
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT_S) == 0
        assert not (tmp_path / "run" / "initdb.log").exists()
    finally:
        proc.kill()
        proc.wait()
