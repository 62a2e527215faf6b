"""cgroup detection on recorded /proc/self/cgroup texts and fake cgroup trees (directories
shaped like /sys/fs/cgroup), and a real memory-capped cgroup when root can make one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from howfast.errors import HowfastError
from howfast.machine.cgroup import (
    MemoryCgroup,
    detect,
    owner_lock_path,
    parse_proc_cgroup,
    remove_if_abandoned,
)

HYBRID = """9:name=systemd:/
4:memory:/process_api/c0327
1:cpu:/
0::/
"""
V2 = "0::/user.slice/user-1000.slice/session-3.scope\n"


def test_parse_proc_cgroup():
    paths = parse_proc_cgroup(HYBRID)
    assert paths["memory"] == "/process_api/c0327" and paths[""] == "/"
    assert parse_proc_cgroup("7:cpu,cpuacct:/a\n") == {"cpu": "/a", "cpuacct": "/a"}


def test_detect_v1_under_own_cgroup(tmp_path: Path):
    own = tmp_path / "memory" / "process_api" / "c0327"
    own.mkdir(parents=True)
    (tmp_path / "unified").mkdir()  # an empty v2 hierarchy beside (hybrid) is not used
    support = detect(tmp_path, HYBRID)
    assert support.version == "v1" and support.parent == own


def test_detect_v2_with_memory_controller(tmp_path: Path):
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    scope = tmp_path / "user.slice" / "user-1000.slice" / "session-3.scope"
    scope.mkdir(parents=True)
    support = detect(tmp_path, V2)
    assert support.version == "v2" and support.parent == scope


def test_detect_nothing(tmp_path: Path):
    (tmp_path / "cgroup.controllers").write_text("cpu pids\n")  # v2 without memory
    support = detect(tmp_path, V2)
    assert support.version is None and "no cgroup memory controller" in support.reason
    with pytest.raises(HowfastError, match="--memory needs a cgroup memory controller"):
        MemoryCgroup(support, "x", 1 << 26)


@pytest.mark.skipif(os.geteuid() != 0, reason="creating cgroups needs root")
def test_real_cgroup_caps_page_cache_and_is_removed(tmp_path: Path):
    support = detect()
    if support.version is None:
        pytest.skip(f"no usable memory cgroup here: {support.reason}")
    limit = 32 * 1024 * 1024
    group = MemoryCgroup(support, f"howfast-test-{os.getpid()}", limit)
    group.create()
    data = Path("/var/tmp") / f"howfast-cgroup-test-{os.getpid()}"
    try:
        # 1 MiB at a time: the process stays small, only the page cache grows past the cap.
        script = (
            f"f = open({str(data)!r}, 'wb')\n"
            f"for _ in range({4 * limit // (1 << 20)}): f.write(b'x' * (1 << 20))\n"
        )
        writer = [sys.executable, "-c", script]
        proc = group.spawn(lambda: subprocess.Popen(writer))
        assert proc.wait(timeout=60) == 0
        peak = group.peak_bytes()
        assert peak is not None and peak <= limit * 1.05, "page cache was capped"
        assert str(os.getpid()) not in (group.path / "cgroup.procs").read_text().split()
    finally:
        data.unlink(missing_ok=True)
        group.remove()
    assert not group.path.exists()


def test_a_cgroup_is_removed_as_abandoned_only_when_its_owner_is_gone_and_it_is_empty(
    tmp_path: Path,
):
    """remove_if_abandoned, which `howfast run` and `howfast cleanup` use: on a real cgroup
    whose creator's owner lock is let go as a SIGKILL would (the descriptor closed, the lock
    file left), with a process inside it first."""
    assert remove_if_abandoned(tmp_path / "howfast-io-00000000") is None  # gone meanwhile
    unowned = tmp_path / "howfast-io-11111111"
    unowned.mkdir()
    assert "no owner lock" in (remove_if_abandoned(unowned) or "")
    support = detect()
    if support.version is None:
        pytest.skip(f"no usable memory cgroup here: {support.reason}")
    group = MemoryCgroup(support, f"howfast-{os.getpid():08x}"[-16:], 64 * 2**20)
    group.create()
    sleeper = None
    try:
        assert "owner lock is held" in (remove_if_abandoned(group.path) or "")
        assert group._owner is not None
        os.close(group._owner)  # its howfast is killed: the kernel lets the lock go
        group._owner = None
        sleeper = group.spawn(lambda: subprocess.Popen(["sleep", "30"]))
        why = remove_if_abandoned(group.path)
        assert why == f"its processes still run (PIDs {sleeper.pid})" and group.path.exists()
        sleeper.kill()
        sleeper.wait()
        assert remove_if_abandoned(group.path, timeout_s=10) is None
        assert not group.path.exists() and not owner_lock_path(group.path.name).exists()
    finally:
        if sleeper is not None and sleeper.poll() is None:
            sleeper.kill()
        if group.path.exists():
            group.path.rmdir()
        owner_lock_path(group.path.name).unlink(missing_ok=True)


# In a process of its own, which moves itself into the cgroup: were the test's own process left
# inside, the cgroup could not be removed.
LEFT_INSIDE = """
import json, os, signal, subprocess, sys
from howfast.machine.cgroup import MemoryCgroup, detect

group = MemoryCgroup(detect(), f"howfast-test-{os.getpid()}", 64 << 20)
group.create()
sleeper = None
try:
    def interrupted():
        raise KeyboardInterrupt  # Ctrl-C while the tool starts
    try:
        group.spawn(interrupted)
    except KeyboardInterrupt:
        pass
    after_interrupt = (group.path / "cgroup.procs").read_text().split()
    sleeper = group.spawn(lambda: subprocess.Popen(["sleep", "30"]))
    # where a signal's exception between the move in and the try that moves back leaves it
    (group.path / "cgroup.procs").write_text(str(os.getpid()))
    found = group.pids()
    print(json.dumps({
        "me": os.getpid(), "sleeper": sleeper.pid, "after_interrupt": after_interrupt,
        "pids": found, "inside_after": (group.path / "cgroup.procs").read_text().split(),
    }))
finally:
    if sleeper is not None:
        sleeper.kill()
        sleeper.wait()
    group.remove()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="creating cgroups needs root")
def test_the_processes_a_cgroup_cleanup_stops_never_include_howfast_itself():
    """pids() is what a server's or standby's cleanup SIGKILLs: howfast left inside its
    cgroup by a Ctrl-C at the wrong moment must be moved back, not listed (it was: a run
    ended by SIGKILL, -9, with nothing said). And a Ctrl-C during spawn() moves it back."""
    if detect().version is None:
        pytest.skip(f"no usable memory cgroup here: {detect().reason}")
    out = subprocess.run(
        [sys.executable, "-c", LEFT_INSIDE], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert str(seen["me"]) not in seen["after_interrupt"]
    assert seen["pids"] == [seen["sleeper"]]
    assert seen["inside_after"] == [str(seen["sleeper"])]
