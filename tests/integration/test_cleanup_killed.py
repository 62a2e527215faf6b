"""`howfast cleanup --local` after a run killed (SIGKILL) at a moment when no process points at
what it made: its server down for a restart event, a standby half copied into a
--standby-dir, the primary just killed by a failover. Each run records what it owns in this
machine's registry (targets/leftovers/registry.py) before it makes it, so one cleanup finds
and removes all of it without being told where: the directories and their markers, the
killed servers' System V segments and /dev/shm/PostgreSQL.* files, the cgroups, the private
directories, the processes.

The cleanup is `--local --pid PID --yes`: the killed howfast's leftovers only, found by the
registry as an unscoped `--local --yes` finds them. Unscoped, it would also take down what
other test sessions' killed runs left on this shared machine while those tests still look at
it. Root only: the servers run as their own OS user, as in test_failover.py."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import pytest

from howfast.targets.leftovers.registry import registry_dir
from tests.conftest import cgroup_dirs
from tests.integration.conftest import (
    Howfast,
    finish,
    postgres_pids_under,
    postgres_shared_memory,
    shared_memory_of,
    wait_for,
)
from tests.integration.test_cleanup import mentions, shm_dirs
from tests.pgprocess import alive, children

pytestmark = pytest.mark.integration

# Every transaction logged (`latency_log = "full"`), as a sampled log of one client's few
# hundred commits a second would be: no unmeasured calibration run of a second before the
# step and its events (workloads/pgbench/logsampling.py).
LOAD = """
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
latency_log = "full"
"""


@pytest.fixture(autouse=True)
def _root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the servers run as their own OS user")


def _server_cgroups(pids: list[int]) -> set[str]:
    """The howfast-* cgroups these processes are in, by name."""
    found = set()
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            found |= {p for p in line.split(":", 2)[-1].split("/") if p.startswith("howfast-")}
    return found


def _cgroups_named(names: set[str]) -> list[str]:
    return sorted(str(p) for p in cgroup_dirs("howfast-*") if p.name in names)


def _base_backups_into(root: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"pg_basebackup") and str(root).encode() in b" ".join(argv):
            found.append(int(entry.name))
    return found


class Killed:
    """What a killed run had, taken before the kill, to look for after the cleanup."""

    def __init__(self, proc_pid: int, directories: list[Path]) -> None:
        self.pid = proc_pid
        self.directories = directories
        self.shared: set[str] = set()
        self.cgroups: set[str] = set()
        self.tokens = sorted(
            {p.name.split("-")[-1] for d in directories for p in d.glob("howfast-*")}
        )

    def take_servers(self, *data_dirs: Path) -> set[str]:
        """The shared memory and cgroups of the servers running on these data directories;
        returns their shared memory."""
        found: set[str] = set()
        for data_dir in data_dirs:
            pid = int((data_dir / "postmaster.pid").read_text().split()[0])
            found |= shared_memory_of(pid)
            self.cgroups |= _server_cgroups([pid])
        self.shared |= found
        self.tokens = sorted(
            {p.name.split("-")[-1] for d in self.directories for p in d.glob("howfast-*")}
        )
        return found

    def registry_files(self) -> list[Path]:
        return sorted(registry_dir().glob(f"*-{self.pid}-*.jsonl"))

    def left(self) -> dict[str, object]:
        found: dict[str, object] = {
            "entries": [str(p) for d in self.directories for p in d.iterdir()],
            "private": shm_dirs(
                *(f"howfast-*{t}-*" for t in self.tokens), f"howfast-work-{self.pid}-*"
            ),
            "shared memory": sorted(postgres_shared_memory() & self.shared),
            "cgroups": _cgroups_named(self.cgroups),
            "processes": [p for d in self.directories for p in postgres_pids_under(d)],
            "registry": [str(p) for p in self.registry_files()],
            **mentions(*(str(d) for d in self.directories)),
        }
        return {k: v for k, v in found.items() if v}


def _cleanup(howfast: Howfast, killed: Killed) -> list[dict]:
    """One `cleanup --local --pid PID --yes`: every leftover it lists is removed."""
    out = howfast("cleanup", "--local", "--pid", str(killed.pid), "--yes", "--json")
    doc = json.loads(out.stdout)
    listed: list[dict] = doc["local"]["leftovers"]
    assert out.returncode == 0, (out.stderr[-2000:], listed)
    assert listed and all(x["removed"] for x in listed), listed
    return listed


def _directories(target_dir: Path, *more: str) -> list[Path]:
    found = [target_dir]
    for name in more:
        other = target_dir.parent / name
        other.mkdir()
        other.chmod(0o755)
        found.append(other)
    return found


def test_a_run_killed_while_its_server_is_down_for_a_restart(
    howfast: Howfast, target_dir: Path
) -> None:
    """SIGKILL between the fast shutdown of a restart event and the new start: no process
    works in the cluster any more. The run is held (SIGSTOP) the moment the server's
    postmaster.pid goes; if its next server was already launched, the next restart is tried."""
    plan = howfast.plan(LOAD.format(duration="40s"))
    events = [a for t in (3, 7, 11, 15, 19, 23, 27) for a in ("--event", f"{t}s:restart")]
    proc = howfast.popen("run", str(plan), "--target", str(target_dir), *events)
    wait_for(proc, "[2/2]")
    (data_dir,) = target_dir.glob("howfast-*/data")
    pid_file = data_dir / "postmaster.pid"
    killed = Killed(proc.pid, [target_dir])
    killed.take_servers(data_dir)
    caught = False
    deadline = time.monotonic() + 120
    while not caught and time.monotonic() < deadline and proc.poll() is None:
        while pid_file.exists() and time.monotonic() < deadline:
            # close to the moment it goes (the next start comes tens of ms later), without
            # taking a core from the run for seconds
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGSTOP)
        held = time.monotonic()
        while time.monotonic() - held < 3 and not pid_file.exists():
            # the old server is gone and no new one was launched: none is running, and no
            # child of the held run (pg_ctl, or a fork not yet pg_ctl) goes on to start one
            if not postgres_pids_under(data_dir) and not _children_but_pgbench(proc.pid):
                caught = True
                break
            time.sleep(0.05)
        if not caught:
            os.kill(proc.pid, signal.SIGCONT)
            while not pid_file.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
    assert caught, "no restart was caught with its server down"
    proc.kill()
    proc.communicate(timeout=30)
    assert (data_dir.parent).is_dir() and not postgres_pids_under(data_dir)

    listed = _cleanup(howfast, killed)
    assert {x["kind"] for x in listed} >= {"cluster", "private directory"}, listed
    assert killed.left() == {}


def test_a_run_killed_during_the_base_backup_into_a_standby_dir(
    howfast: Howfast, target_dir: Path
) -> None:
    """SIGKILL while pg_basebackup copies the primary into --standby-dir (held meanwhile,
    then let go: it goes on alone, as a killed run's does)."""
    target, other = _directories(target_dir, "standbys")
    plan = howfast.plan(LOAD.format(duration="5s"))
    proc = howfast.popen("run", str(plan), "--target", str(target), "--replicas", "1",
                         "--standby-dir", str(other))  # fmt: skip
    deadline = time.monotonic() + 150
    while not (copying := _base_backups_into(other)) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.01)
    assert copying, "no base backup into the standby directory was seen"
    for pid in copying:
        os.kill(pid, signal.SIGSTOP)
    (primary,) = target.glob("howfast-*/data")
    killed = Killed(proc.pid, [target, other])
    killed.take_servers(primary)
    (partial,) = other.glob("howfast-*")
    proc.kill()
    proc.communicate(timeout=30)
    for pid in copying:
        os.kill(pid, signal.SIGCONT)

    listed = _cleanup(howfast, killed)
    assert str(partial) in {x["path"] for x in listed}, listed
    assert killed.left() == {}


def test_a_run_killed_while_a_failover_promotes_the_standby(
    howfast: Howfast, target_dir: Path
) -> None:
    """SIGKILL after the failover killed the primary, while `pg_ctl promote -w` waits (the
    standby's postmaster held by the test, then let go): the killed primary's System V
    segment and /dev/shm/PostgreSQL.* files are left with no server, the standby runs on in
    its cgroup."""
    plan = howfast.plan(LOAD.format(duration="20s"))
    proc = howfast.popen("run", str(plan), "--target", str(target_dir), "--replicas", "1",
                         "--event", "4s:failover")  # fmt: skip
    wait_for(proc, "pgbench tpcb-like")
    (standby,) = target_dir.glob("howfast-*/**/standby_1/data")
    (primary,) = target_dir.glob("howfast-*/data")
    killed = Killed(proc.pid, [target_dir])
    killed_primary = killed.take_servers(primary)
    killed.take_servers(standby)
    assert killed_primary and len(killed.cgroups) == 2, (killed_primary, killed.cgroups)
    postmaster = int((standby / "postmaster.pid").read_text().split()[0])
    os.kill(postmaster, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 60
        while postgres_pids_under(primary) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not postgres_pids_under(primary), "the failover did not start"
        proc.kill()
        proc.communicate(timeout=30)
    finally:
        os.kill(postmaster, signal.SIGCONT)
    assert postgres_shared_memory() & killed_primary  # left by the killed primary

    listed = _cleanup(howfast, killed)
    assert "shared memory" in {x["kind"] for x in listed}, listed
    assert killed.left() == {}


def test_a_run_records_what_it_owns_and_its_file_goes_when_it_ends(
    howfast: Howfast, target_dir: Path
) -> None:
    """While it runs, its registry file names its cluster (before it was made) and its
    server's shared memory; once it ends, nothing of it is left and the file is gone. A
    cluster kept with --keep is written off: the file goes all the same, and cleanup leaves
    the cluster alone."""
    # 5 s: the registry is read while the step runs (it had 2 s more with a calibration run)
    plan = howfast.plan(LOAD.format(duration="5s"))
    proc = howfast.popen("run", str(plan), "--target", str(target_dir), "--keep")
    wait_for(proc, "[2/2]")
    run = Killed(proc.pid, [target_dir])  # not killed: its marks taken the same way
    (path,) = run.registry_files()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    (cluster,) = target_dir.glob("howfast-*")
    assert lines[0]["writer"]["pid"] == proc.pid
    assert {"directory": str(cluster), "role": "cluster"} in lines
    assert any("sysv" in line and line["data_dir"] == str(cluster / "data") for line in lines)
    _, err = finish(proc, None, 120)
    assert proc.returncode == 0, err[-2000:]
    assert run.registry_files() == []
    out = howfast("cleanup", "--local", "--pid", str(proc.pid), "--yes", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["local"]["leftovers"] == []
    assert (cluster / "data" / "PG_VERSION").exists()  # kept


def _children_but_pgbench(pid: int) -> list[int]:
    """The running children of `pid` other than its load (pgbench): SIGSTOP holds `pid`
    alone, and a child it had just started (a restart's pg_ctl) would still start a server
    after it. A zombie (the restart's `pg_ctl stop`, done, not reaped by the held run) starts
    nothing."""
    found = []
    for child in children(pid):
        with contextlib.suppress(OSError):
            if alive(child) and Path(f"/proc/{child}/comm").read_text().strip() != "pgbench":
                found.append(child)
    return found
