"""`howfast cleanup` on this machine, on real leftovers: runs killed with SIGKILL (a plain one,
whose server keeps running, and one on an emulated volume), and a live run beside them that
must not be touched. Every removal is scoped with --target to the test's own directories:
other sessions' runs share this machine, and an unscoped listing (read-only) must show them
as in use."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from howfast.targets.emulated.volume import available
from tests.conftest import cgroup_dirs, shared_tmpdir
from tests.integration.conftest import (
    Howfast,
    finish,
    postgres_pids_under,
    postgres_shared_memory,
    remove_leftovers,
    shared_memory_of,
    wait_for,
)

pytestmark = pytest.mark.integration

# `rate`: the step only holds the server while the test kills the run; not flat out.
LONG_PLAN = """
[settings]
shared_buffers = "32MB"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1]
duration = "{duration}"
rate = 50
"""
EMULATED = ["--storage-latency", "1ms", "--storage-size", "256MiB"]


def cleanup(howfast: Howfast, *args: str) -> dict:
    out = howfast("cleanup", "--json", *args)
    doc: dict = json.loads(out.stdout) if out.stdout.startswith("{") else {}
    failed = [x for x in doc.get("local", {}).get("leftovers", []) if x["error"]]
    assert out.returncode == 0, (out.stderr, [(x["kind"], x["path"], x["error"]) for x in failed])
    return doc


def leftovers(doc: dict) -> list[dict]:
    found: list[dict] = doc["local"]["leftovers"]
    return found


def shm_dirs(*patterns: str) -> list[str]:
    return sorted(p.name for pattern in patterns for p in Path("/dev/shm").glob(pattern))


def cgroups_named(*tokens: str) -> list[str]:
    found = cgroup_dirs("howfast-*")
    return sorted(str(p) for p in found if any(t in p.name for t in tokens))


def mentions(*needles: str) -> dict[str, list[str]]:
    """Mounts, loop devices and processes whose description holds one of `needles`."""
    mounts = [
        line
        for line in Path("/proc/self/mounts").read_text().splitlines()
        if any(n in line for n in needles)
    ]
    loops = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            text = backing.read_text()
        except OSError:  # detached meanwhile (other tests' volumes, the lab's disks)
            continue
        if any(n in text for n in needles):
            loops.append(f"{backing.parent.parent.name} {text.strip()}")
    processes = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if any(n in cmdline or n in cwd for n in needles):
            processes.append(f"{proc.name} {cmdline[:120]}")
    return {k: v for k, v in (("mounts", mounts), ("loops", loops), ("processes", processes)) if v}


# The processes a PostgreSQL server keeps while it runs (its backends and workers come and go)
AUXILIARY = ("checkpointer", "background writer", "walwriter", "autovacuum launcher")


def _auxiliary(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return any(name in cmdline for name in AUXILIARY)


def _wait_for_tool(run_pid: int, name: str, timeout_s: float = 60.0) -> int:
    """The PID of a `name` process working in the run's private work directory, started with
    -P or -l and -T (the measured pgbench; the calibration run before it is bare, and the
    round-trip probe runs -t 1000 transactions: both end in seconds)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                comm = (entry / "comm").read_text().strip()
                cwd = os.readlink(entry / "cwd")
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if (
                comm == name
                and f"/howfast-work-{run_pid}-" in cwd
                and ({b"-P", b"-l"} & set(argv))
                and b"-T" in argv
            ):
                return int(entry.name)
        time.sleep(0.1)
    raise AssertionError(f"no {name} of run {run_pid} within {timeout_s:.0f} s")


def test_options_are_checked_and_the_parts_say_why_they_were_skipped(
    howfast: Howfast, tmp_path: Path
):
    for args, said in (
        (["--target", ""], "--target is empty"),
        (["--target", str(tmp_path / "nope")], "no such directory"),
        (["--local", "--k8s"], "exclude each other"),
        (["--k8s", "--target", str(tmp_path)], "not with --k8s"),
        (["--local", "--namespace", "x"], "not with --local"),
        (["--k8s", "--pid", "4242"], "--pid names a process of this machine: not with --k8s"),
        (["--pid", "0"], "Invalid value for '--pid'"),
    ):
        out = howfast("cleanup", *args)
        assert out.returncode == 2 and said in out.stderr, (args, out.stderr)
    # No kubeconfig here: the cluster's part is skipped with the reason, the local one works
    # (read-only: no --yes; this machine's other runs are listed, never touched).
    env = {**howfast.env(), "HOME": str(tmp_path)}
    env.pop("KUBECONFIG", None)
    out = subprocess.run(howfast.argv("cleanup", "--json"), env=env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["kubernetes"]["skipped"].startswith("no Kubernetes cluster is configured")
    assert doc["runs"] == [] and doc["local"]["skipped"] is None
    assert all(not x["removed"] for x in leftovers(doc))
    out = subprocess.run(howfast.argv("cleanup", "--k8s"), env=env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 2 and "cannot load a kubeconfig" in out.stderr, out.stderr
    doc = cleanup(howfast, "--target", str(tmp_path))
    assert leftovers(doc) == [] and "--target" in doc["kubernetes"]["skipped"]
    # --pid of a process that left nothing: this machine only, nothing listed
    doc = cleanup(howfast, "--pid", str(2**22 + 1))
    assert leftovers(doc) == [] and "--pid" in doc["kubernetes"]["skipped"]


def test_a_killed_runs_server_is_listed_with_its_stop_command_and_stopped_only_with_yes(
    howfast: Howfast, target_dir: Path
):
    plan = howfast.plan(LONG_PLAN.format(duration="120s"))
    proc = howfast.popen("run", str(plan), "--target", str(target_dir))
    wait_for(proc, "[2/2]")
    # pgbench starts a moment after the step's line (later on a loaded machine): kill the run
    # once its pgbench runs, as a killed run's tool is one of the things to be found
    pgbench = _wait_for_tool(proc.pid, "pgbench")
    # held until it is listed: once its howfast is killed, pgbench's next progress line goes
    # to a pipe nobody reads, and SIGPIPE ends it (on a loaded machine, before the listing)
    os.kill(pgbench, signal.SIGSTOP)
    try:
        _list_then_remove(howfast, target_dir, proc, plan, pgbench)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pgbench, signal.SIGCONT)


def _list_then_remove(
    howfast: Howfast, target_dir: Path, proc: subprocess.Popen[str], plan: Path, pgbench: int
) -> None:
    (cluster,) = target_dir.glob("howfast-*")
    token = cluster.name.removeprefix("howfast-")
    servers = postgres_pids_under(cluster)
    # from its pid file, not the lowest PID: after the PID counter wraps, a backend may have
    # a lower one (seen: a sampling session's backend, gone with the killed howfast)
    postmaster = int((cluster / "data" / "postmaster.pid").read_text().split()[0])
    assert postmaster in servers, (postmaster, servers)
    shared_memory = shared_memory_of(postmaster)
    lasting = {pid for pid in servers if pid == postmaster or _auxiliary(pid)}
    proc.kill()
    proc.communicate(timeout=30)
    mine = (f"howfast-run-{token}-*", f"howfast-work-{proc.pid}-*")
    assert len(shm_dirs(*mine)) == 2  # SIGKILL: nothing was removed

    listed = cleanup(howfast, "--target", str(target_dir))
    found = {x["kind"]: x for x in leftovers(listed)}
    server = found["server"]
    assert server["state"] == "gone" and server["path"] == str(cluster / "data")
    assert f"pg_ctl -D {cluster / 'data'} stop -m fast" in server["stop_command"]
    assert (
        found["cluster"]["path"] == str(cluster)
        and found["tool"]["path"] == f"pgbench PID {pgbench}"
    )
    privates = [x for x in leftovers(listed) if x["kind"] == "private directory"]
    listed_dirs = {Path(x["path"]).name for x in privates}
    assert listed_dirs == set(shm_dirs(*mine))
    assert not any(x["removed"] for x in leftovers(listed))
    os.kill(pgbench, signal.SIGCONT)  # listed: it may go its way now
    # Listing stops nothing. Only the server's own processes are compared: an autovacuum
    # worker or the killed howfast's sampling sessions may have ended since, and others begun.
    assert lasting <= set(postgres_pids_under(cluster))
    text = howfast("cleanup", "--target", str(target_dir))
    assert "stop it by hand" in text.stdout and "pass --yes to remove them" in text.stderr

    # The next run on the directory is refused and says what to do.
    again = howfast("run", str(plan), "--target", str(target_dir))
    assert again.returncode == 2 and f"howfast cleanup --target {target_dir}" in again.stderr

    removed = cleanup(howfast, "--target", str(target_dir), "--yes")
    assert all(x["removed"] for x in leftovers(removed)), leftovers(removed)
    assert postgres_pids_under(target_dir) == []
    assert postgres_shared_memory() & shared_memory == set()  # a clean shutdown
    assert list(target_dir.iterdir()) == []  # the ownership marker went too
    assert shm_dirs(*mine) == [] and cgroups_named(token) == []
    assert leftovers(cleanup(howfast, "--target", str(target_dir))) == []


@pytest.mark.emulated
@pytest.mark.skipif(
    available().name is None, reason=f"no emulated volumes here: {available().reason}"
)
def test_a_killed_emulated_volume_is_taken_down_and_a_live_one_beside_it_is_not(
    howfast: Howfast, target_dir: Path
):
    live_dir = shared_tmpdir("howfast-target-live-")
    try:
        plan = howfast.plan(LONG_PLAN.format(duration="150s"))
        live = howfast.popen("run", str(plan), "--target", str(live_dir), *EMULATED)
        wait_for(live, "[2/2]")
        killed = howfast.popen("run", str(plan), "--target", str(target_dir), *EMULATED)
        wait_for(killed, "[2/2]")
        time.sleep(2)
        (volume,) = target_dir.glob("howfast-vol-*")
        vol_token = volume.name.removeprefix("howfast-vol-")
        (cluster,) = (volume / "mnt").glob("howfast-*")
        token = cluster.name.removeprefix("howfast-")
        assert mentions(str(volume))["mounts"] and mentions(vol_token)["loops"]
        live_before = mentions(str(live_dir))
        killed.kill()
        killed.communicate(timeout=30)
        mine = (
            f"howfast-vol-{vol_token}-*", f"howfast-run-{token}-*", f"howfast-work-{killed.pid}-*"
        )  # fmt: skip
        assert len(shm_dirs(*mine)) == 3

        listed = cleanup(howfast, "--target", str(target_dir))
        (vol,) = [x for x in leftovers(listed) if x["kind"] == "volume"]
        assert vol["state"] == "gone" and vol["path"] == str(volume)
        assert any(d.startswith("loop device /dev/loop") for d in vol["details"]), vol
        assert (volume / "volume.img").exists() and mentions(str(volume))["mounts"]
        # Unscoped (read-only), the live run's things are in use and left alone.
        everything = leftovers(cleanup(howfast))
        live_items = [x for x in everything if str(live_dir) in x["path"]]
        assert live_items and all(x["state"] == "in use" for x in live_items), live_items
        assert any(x["path"] == str(volume) and x["state"] == "gone" for x in everything)

        attached = [d.split()[0] for d in mentions(vol_token)["loops"]]
        removed = cleanup(howfast, "--target", str(target_dir), "--yes")
        assert all(x["removed"] for x in leftovers(removed)), leftovers(removed)
        assert mentions(str(target_dir), vol_token, token) == {}
        # Detached, not only renamed: stopping nbdfuse detaches its FUSE mount lazily, and a
        # loop device still on it then reads "/nbd", which names no volume (seen: one left
        # attached by each clean-clone run).
        still = {d: (Path("/sys/block") / d / "loop/backing_file") for d in attached}
        assert [f"{d} {f.read_text().strip()}" for d, f in still.items() if f.exists()] == []
        assert list(target_dir.iterdir()) == []
        assert shm_dirs(*mine) == [] and cgroups_named(vol_token, token) == []

        # The live run kept every layer (its mounts, nbdkit and its server: the same
        # processes), and still takes them down itself on Ctrl-C.
        live_after = mentions(str(live_dir))
        assert live_after["mounts"] == live_before["mounts"]
        layers = [p for p in live_before["processes"] if "nbdkit" in p or "postgres -D" in p]
        assert len(layers) == 2 and set(layers) <= set(live_after["processes"]), live_after
        assert live.poll() is None
        live.send_signal(signal.SIGINT)
        _, err = finish(live, None, 120)
        assert live.returncode == 130, err
        assert mentions(str(live_dir)) == {} and list(live_dir.iterdir()) == []
    finally:
        howfast.stop_all()  # a failed test's live run: stopped as a user would, first
        remove_leftovers(live_dir)
        subprocess.run(["rm", "-rf", "--one-file-system", str(live_dir)], check=False)
