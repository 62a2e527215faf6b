"""Bad input and faults: each gives a clear error, loses nothing and leaves nothing behind."""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from howfast.cli.progress import error_cause
from tests.integration.conftest import (
    TINY_PLAN,
    Howfast,
    postgres_pids_under,
    postgres_shared_memory,
    shared_memory_of,
)

pytestmark = pytest.mark.integration

# `rate`: a step that only holds the server for the test runs 50 transactions/s, not flat out:
# what the test checks does not depend on its throughput, and the machine's CPU is shared.
LONG_PLAN = """
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [2]
duration = "60s"
rate = 50
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1]
duration = "2s"
"""


def runs_in_store(howfast: Howfast) -> list[dict[str, object]]:
    out = howfast("results", "list", "--json")
    assert out.returncode == 0, out.stderr
    runs: list[dict[str, object]] = json.loads(out.stdout)
    return runs


def test_missing_target_directory(howfast: Howfast, target_dir: Path):
    out = howfast("run", "quick", "--target", str(target_dir / "nope"))
    assert out.returncode == 2
    errors = [line for line in out.stderr.splitlines() if line.startswith("howfast: error:")]
    assert len(errors) == 1 and "does not exist" in errors[0]
    assert runs_in_store(howfast) == []


def test_foreign_non_empty_directory_is_refused_and_untouched(howfast: Howfast, target_dir):
    (target_dir / "precious.dat").write_text("user data")
    out = howfast("run", "quick", "--target", str(target_dir))
    assert out.returncode == 2
    assert "not empty" in out.stderr and "precious.dat" in out.stderr
    assert sorted(p.name for p in target_dir.iterdir()) == ["precious.dat"]
    assert runs_in_store(howfast) == []


def test_target_is_a_file(howfast: Howfast, target_dir: Path):
    f = target_dir / "file"
    f.write_text("x")
    out = howfast("run", "quick", "--target", str(f))
    assert out.returncode == 2 and "not a directory" in out.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: checks the unprivileged server user")
def test_directory_the_server_user_cannot_reach(howfast: Howfast, target_dir: Path):
    hidden = target_dir / "private"
    hidden.mkdir(mode=0o700)
    inner = hidden / "bench"
    inner.mkdir()
    out = howfast("run", "quick", "--target", str(inner))
    assert out.returncode == 2
    assert "cannot enter" in out.stderr and str(hidden) in out.stderr
    assert list(inner.iterdir()) == []


def test_plan_with_a_typo_names_key_and_line(howfast: Howfast, target_dir: Path):
    plan = howfast.plan(TINY_PLAN.replace("clients = [2]", "clints = [2]"), "typo.toml")
    out = howfast("run", str(plan), "--target", str(target_dir))
    assert out.returncode == 2
    line = TINY_PLAN.splitlines().index("clients = [2]") + 1
    assert f"typo.toml:{line}" in out.stderr and "clints" in out.stderr
    assert "clients" in out.stderr  # the suggestion


def test_impossible_value_in_plan(howfast: Howfast, target_dir: Path):
    plan = howfast.plan(TINY_PLAN.replace("clients = [2]", "clients = [0]"), "zero.toml")
    out = howfast("run", str(plan), "--target", str(target_dir))
    assert out.returncode == 2 and "zero.toml" in out.stderr and "clients" in out.stderr


def test_no_postgresql_binaries_says_what_to_install(howfast: Howfast, target_dir: Path):
    out = howfast("run", "quick", "--target", str(target_dir), "--pg-bin", str(target_dir))
    assert out.returncode == 1
    assert "apt-get install" in out.stderr and "postgresql" in out.stderr


def _step_outcomes(howfast: Howfast) -> list[tuple[str, str | None]]:
    shown = json.loads(howfast("results", "show", "1", "--json").stdout)
    return [(step["status"], step.get("error")) for step in shown["steps"]]


def _wait_for(proc, text: str, timeout: float = 120) -> str:
    """Read stderr until `text` appears; return what was read."""
    seen = ""
    deadline = time.monotonic() + timeout
    assert proc.stderr is not None
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
        if text in line:
            return seen
    raise AssertionError(f"{text!r} not seen in stderr:\n{seen}")


def _cluster_pid(target_dir: Path) -> int:
    pidfiles = list(target_dir.glob("howfast-*/data/postmaster.pid"))
    assert len(pidfiles) == 1
    return int(pidfiles[0].read_text().splitlines()[0])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT])
def test_interrupt_keeps_completed_steps_and_cleans_up(howfast: Howfast, target_dir, sig):
    plan = howfast.plan(LONG_PLAN)
    proc = howfast.popen("run", str(plan), "--target", str(target_dir))
    _wait_for(proc, "[2/3]")  # the init step is stored, the 60 s step is running
    time.sleep(1.5)
    assert postgres_pids_under(target_dir), "the server runs during the step"
    proc.send_signal(sig)
    proc.communicate(timeout=90)
    assert proc.returncode == 130
    runs = runs_in_store(howfast)
    assert len(runs) == 1 and runs[0]["status"] == "aborted"
    doc = json.loads(howfast("results", "show", str(runs[0]["id"]), "--json").stdout)
    assert [s["workload"] for s in doc["steps"]] == ["pgbench-init"]
    assert doc["steps"][0]["status"] == "completed"
    assert postgres_pids_under(target_dir) == []
    assert list(target_dir.iterdir()) == []


def test_server_dying_mid_step_fails_that_step_and_the_run_goes_on(howfast, target_dir):
    plan = howfast.plan(LONG_PLAN.replace('duration = "60s"', 'duration = "20s"'))
    proc = howfast.popen("run", str(plan), "--target", str(target_dir), "--json")
    _wait_for(proc, "[2/3]")
    time.sleep(2)
    pid = _cluster_pid(target_dir)
    shared_memory = shared_memory_of(pid)  # this server's, not other servers' on the machine
    assert shared_memory, "a running postmaster maps its shared memory"
    if os.geteuid() == 0:
        uid_line = next(
            line
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith("Uid:")
        )
        assert uid_line.split()[1] != "0", "PostgreSQL must never run as root"
    os.kill(pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    doc = json.loads(out)
    assert doc["status"] == "failed"
    statuses = [s["status"] for s in doc["steps"]]
    assert statuses == ["completed", "failed", "failed"]
    failed = doc["steps"][1]
    assert "pgbench exited" in failed["error"]
    assert "server is not running" in failed["error"]
    # The terminal shows why, not only "pgbench exited with status 2:".
    cause = error_cause(failed["error"])
    assert cause and cause[-1].strip() in err
    assert list(target_dir.iterdir()) == []
    assert postgres_pids_under(target_dir) == []
    # The killed server's shared memory was removed by starting it once more before deletion.
    assert postgres_shared_memory() & shared_memory == set()


def _children(pid: int) -> dict[int, str]:
    """The child processes of `pid` and their command names."""
    kids: dict[int, str] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            listed = (task / "children").read_text().split()
        except FileNotFoundError:  # a thread that ended since the listing (seen under load)
            continue
        for kid in listed:
            with contextlib.suppress(OSError):
                kids[int(kid)] = Path(f"/proc/{kid}/comm").read_text().strip()
    return kids


def _children_once_pgbench_runs(proc: subprocess.Popen[str], timeout: float = 60) -> dict[int, str]:
    """The run's children once the step's own pgbench (LONG_PLAN's `-T 60`) has started. The
    step line comes before the step's preparations (samplers, a 1 s calibration pgbench for
    the log's sampling), which on a loaded machine can outlast any fixed sleep: waited for,
    not assumed; and not the calibration's pgbench, which ends by itself (a loaded run once
    took it for the step's and found it gone)."""
    deadline = time.monotonic() + timeout
    while True:
        kids = _children(proc.pid)
        if any(name == "pgbench" and _runs_for_60_s(pid) for pid, name in kids.items()):
            return kids
        assert proc.poll() is None and time.monotonic() < deadline, kids
        time.sleep(0.05)


def _runs_for_60_s(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return False
    return any(a == "-T" and b == "60" for a, b in itertools.pairwise(argv))


def test_sigkilled_run_is_closed_by_the_next_command_and_its_server_refused(
    howfast: Howfast, target_dir: Path
):
    """SIGKILL cannot be caught: the run stays `running` and its server keeps going. The next
    howfast sees the run's process is gone and marks it aborted, and refuses to benchmark the
    same directory while that server runs."""
    plan = howfast.plan(LONG_PLAN)
    proc = howfast.popen("run", str(plan), "--target", str(target_dir))
    _wait_for(proc, "[2/3]")
    leftovers = _children_once_pgbench_runs(proc)  # pgbench, in its own session, and the postmaster
    assert sorted(leftovers.values()) == ["pgbench", "postgres"], leftovers
    postmaster = next(pid for pid, name in leftovers.items() if name == "postgres")
    shared_memory = shared_memory_of(postmaster)
    assert shared_memory, "a running postmaster maps its shared memory"
    token = next(target_dir.glob("howfast-*")).name.removeprefix("howfast-")
    # Its run directory (socket, server log) and work directory (pgbench's logs) in memory.
    memory_dirs = [*Path("/dev/shm").glob(f"howfast-run-{token}-*")]
    for pid in leftovers:
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        if cwd.is_relative_to("/dev/shm/"):
            memory_dirs.append(Path("/dev/shm") / cwd.relative_to("/dev/shm").parts[0])
    proc.kill()
    proc.communicate(timeout=30)
    try:
        out = howfast("results", "list", "--json")
        assert out.returncode == 0, out.stderr
        runs = json.loads(out.stdout)
        assert len(runs) == 1 and runs[0]["status"] == "aborted"
        assert f"(PID {proc.pid}) is gone" in out.stderr and "Marked aborted" in out.stderr
        doc = json.loads(howfast("results", "show", str(runs[0]["id"]), "--json").stdout)
        assert [s["status"] for s in doc["steps"]] == ["completed"]  # the init step is kept
        assert doc["finished_at"] == doc["steps"][0]["finished_at"]

        again = howfast("run", str(plan), "--target", str(target_dir))
        assert again.returncode == 2
        assert "its server is still running" in again.stderr and "pg_ctl -D" in again.stderr
        assert len(runs_in_store(howfast)) == 1  # the refusal stored nothing
    finally:
        # What the killed howfast would have stopped, by PID: its pgbench, and its server
        # with an immediate shutdown (which also removes the server's shared memory).
        for pid, name in leftovers.items():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGQUIT if name == "postgres" else signal.SIGKILL)
        deadline = time.monotonic() + 30
        while postgres_pids_under(target_dir) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in postgres_pids_under(target_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for directory in memory_dirs:
            assert directory.name.startswith("howfast-"), directory
            shutil.rmtree(directory, ignore_errors=True)
    assert postgres_pids_under(target_dir) == []
    assert postgres_shared_memory() & shared_memory == set()


def test_ctrl_c_while_howfast_loads_is_an_interruption(howfast: Howfast, target_dir: Path):
    """A Ctrl-C before the run starts (the modules take a second or more to load on a busy
    machine) ends with "interrupted" and status 130, not a traceback."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [
            sys.executable,
            "-X",
            "importtime",
            "-X",
            "faulthandler",
            "-m",
            "howfast",
            "run",
            "--target",
            str(target_dir),
        ],
        env=howfast.env(),
        stderr=subprocess.PIPE,
        text=True,
        cwd=howfast.workdir,
    )
    assert proc.stderr is not None
    seen = ""
    while "howfast.cli" not in seen:  # the interpreter is up and loading howfast's modules
        line = proc.stderr.readline()
        assert line, seen
        seen += line
    proc.send_signal(signal.SIGINT)
    try:
        rest = proc.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:  # seen once under heavy load: say where it is stuck
        proc.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
        stuck = proc.communicate()[1]
        threads = [line for line in stuck.splitlines() if not line.startswith("import time")]
        pytest.fail("howfast still ran 60 s after SIGINT:\n" + "\n".join(threads[-60:]))
    assert proc.returncode == 130, rest
    assert "Traceback" not in rest and "howfast: interrupted" in rest
    assert list(target_dir.iterdir()) == []


@pytest.mark.parametrize("phase", ["initdb", "server start"])
def test_ctrl_c_during_start_up(howfast: Howfast, target_dir: Path, phase: str):
    """Ctrl-C (to the whole process group, as a terminal sends it) while initdb runs or the
    server starts: a clear interruption, the run aborted, nothing left behind."""
    import subprocess

    plan = howfast.plan(LONG_PLAN)
    proc = subprocess.Popen(
        howfast.argv("run", str(plan), "--target", str(target_dir)),
        env=howfast.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=howfast.workdir,
        start_new_session=True,
    )
    pattern = "howfast-*/data/base" if phase == "initdb" else "howfast-*/data/postmaster.pid"
    deadline = time.monotonic() + 120
    while not list(target_dir.glob(pattern)) and time.monotonic() < deadline:
        time.sleep(0.002)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert postgres_pids_under(target_dir) == []
    assert list(target_dir.iterdir()) == []
    runs = runs_in_store(howfast)
    assert [r["status"] for r in runs] in ([], ["aborted"])


# A run that another command must find live is stopped by the test (SIGINT) once that command
# is done, never by its end: its step lasts far longer than the command can take on a loaded
# machine (a howfast process starts its own interpreter: seconds there).
HOLD_S = 900

SHORT_PLAN = """
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
duration = "6s"
rate = 50
"""


def test_two_runs_started_together_on_one_directory(howfast: Howfast, target_dir: Path):
    """Only one proceeds; the other is refused, naming it, and told nothing about stopping."""
    plan = howfast.plan(SHORT_PLAN)
    procs = [howfast.popen("run", str(plan), "--target", str(target_dir)) for _ in range(2)]
    errs = [p.communicate(timeout=240)[1] for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 2], errs
    winner = procs[codes.index(0)]
    refused = errs[codes.index(2)]
    assert "is in use by" in refused and f"(PID {winner.pid})" in refused, refused
    assert "pg_ctl" not in refused and "stop it" not in refused
    assert [r["status"] for r in runs_in_store(howfast)] == ["completed"]
    assert list(target_dir.iterdir()) == []


def test_a_run_started_later_names_the_live_run(howfast: Howfast, target_dir: Path):
    plan = howfast.plan(SHORT_PLAN.replace('"6s"', f'"{HOLD_S}s"'))
    first = howfast.popen("run", str(plan), "--target", str(target_dir))
    _wait_for(first, "[2/2]")
    again = howfast("run", str(plan), "--target", str(target_dir))
    assert first.poll() is None, "the first run held the directory throughout"
    first.send_signal(signal.SIGINT)
    _, first_err = first.communicate(timeout=90)
    assert again.returncode == 2
    assert f"in use by run 1 (PID {first.pid}) since " in again.stderr, again.stderr
    assert "pg_ctl" not in again.stderr
    # Seen once in CI as "failed" (not reproduced in 26 tries since, under load too): say
    # what each step recorded, so that the next occurrence names its cause.
    statuses = [r["status"] for r in runs_in_store(howfast)]
    assert statuses == ["aborted"], (first_err[-2000:], _step_outcomes(howfast))
    assert list(target_dir.iterdir()) == []
    assert postgres_pids_under(target_dir) == []


def test_a_running_run_cannot_be_deleted(howfast: Howfast, target_dir: Path):
    plan = howfast.plan(LONG_PLAN.replace('"60s"', f'"{HOLD_S}s"'))
    proc = howfast.popen("run", str(plan), "--target", str(target_dir))
    _wait_for(proc, "[2/3]")
    refused = howfast("results", "delete", "1")
    assert proc.poll() is None, "the run went on throughout"
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=90)
    assert refused.returncode == 2, refused.stderr
    assert f"run 1 is still running (howfast PID {proc.pid})" in refused.stderr
    assert [r["status"] for r in runs_in_store(howfast)] == ["aborted"]
    deleted = howfast("results", "delete", "1")  # once it has ended
    assert deleted.returncode == 0, deleted.stderr
    assert runs_in_store(howfast) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: mounts a read-only filesystem")
def test_read_only_target_says_read_only(howfast: Howfast, target_dir: Path):
    import subprocess

    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "howfast-ro", str(target_dir)])
    try:
        out = howfast("run", "quick", "--target", str(target_dir))
    finally:
        subprocess.run(["umount", str(target_dir)], check=True)
    assert out.returncode == 2
    assert "read-only filesystem" in out.stderr and "not writable by this user" not in out.stderr
    assert runs_in_store(howfast) == []


def test_server_log_has_no_readiness_probe_noise(howfast: Howfast, target_dir: Path):
    """pg_isready's probes must not fill the server log (and every error's log tail) with
    FATAL "database ... does not exist"."""
    plan = howfast.plan('[[steps]]\nworkload = "pgbench-init"\nscale = 1\n')
    out = howfast("run", str(plan), "--target", str(target_dir), "--keep")
    try:
        assert out.returncode == 0, out.stderr
        (log,) = target_dir.glob("howfast-*/server.log")
        text = log.read_text()
        assert "database system is ready to accept connections" in text
        assert "does not exist" not in text, text
    finally:
        for cluster in target_dir.glob("howfast-*"):
            shutil.rmtree(cluster)
        for name in (".howfast-owned", ".howfast-lock"):
            (target_dir / name).unlink(missing_ok=True)


SETTINGS_PLAN = """
[settings]
shared_bufers = "32MB"
wal_level = "bogus"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
duration = "2s"
settings = { work_mem = "lots", "auto_explain.log_min_duration" = "1s" }
"""


def test_settings_are_checked_by_postgresql_before_the_run(howfast: Howfast, target_dir: Path):
    """Misspelt names and values the server refuses, in the plan, a step and --set: exit 2,
    every one named where it was written, the closest name suggested, nothing created."""
    plan = howfast.plan(SETTINGS_PLAN, "settings.toml")
    out = howfast(
        "run", str(plan), "--target", str(target_dir),
        "--set", "max_conections=10", "--set", "fsync=maybe",
        "--set", "zero_damaged_pages=off",  # a developer option: known, though not listed
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    err = out.stderr
    assert "settings.toml:3: settings.shared_bufers: unknown setting" in err
    assert "did you mean 'shared_buffers'" in err
    assert 'settings.toml:4: settings.wal_level: invalid value for parameter "wal_level"' in err
    assert "settings.toml:13: steps[1].settings.work_mem: invalid value" in err
    assert "--set max_conections=10: unknown setting" in err and "'max_connections'" in err
    assert "--set fsync=maybe:" in err and "zero_damaged_pages" not in err
    assert "auto_explain" not in err  # an extension's setting is the extension's business
    assert runs_in_store(howfast) == []
    assert list(target_dir.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: mounts a small filesystem")
def test_a_scale_that_cannot_fit_is_refused_before_loading(howfast: Howfast, target_dir: Path):
    """A huge --scale used to fill the filesystem until PostgreSQL PANICked."""
    import subprocess

    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=160m,mode=0755", "howfast-small", str(target_dir)],
        check=True,
    )
    try:
        plan = howfast.plan(SHORT_PLAN.replace('"6s"', '"1s"'))
        out = howfast("run", str(plan), "--target", str(target_dir), "--scale", "40", "--json")
        leftovers = list(target_dir.iterdir())
    finally:
        subprocess.run(["umount", str(target_dir)], check=True)
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    init = doc["steps"][0]
    assert init["status"] == "failed"
    assert "scale 40 needs about" in init["error"] and "per scale unit, measured" in init["error"]
    assert "free: not loaded" in init["error"]
    assert "PANIC" not in out.stderr and "No space left" not in init["error"]
    assert leftovers == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: --memory creates a cgroup")
def _tasks(cgroup: Path) -> list[str]:
    try:
        return (cgroup / "cgroup.procs").read_text().split()
    except OSError:
        return []


def test_memory_cgroup_of_a_sigkilled_run_is_removed_by_the_next_howfast(
    howfast: Howfast, target_dir: Path
):
    from howfast.machine.cgroup import detect, owner_lock_path

    parent = detect().parent
    if parent is None:
        pytest.skip("no writable memory cgroup")
    plan = howfast.plan(LONG_PLAN)
    proc = howfast.popen(
        "run", str(plan), "--target", str(target_dir), "--memory", "256MiB",
        "--set", "shared_buffers=32MB", "--set", "maintenance_work_mem=16MB",
    )  # fmt: skip
    _wait_for(proc, "[2/3]")
    leftovers = _children_once_pgbench_runs(proc)
    cluster = next(target_dir.glob("howfast-*"))
    cgroup = parent / cluster.name
    token = cluster.name.removeprefix("howfast-")
    memory_dirs = [*Path("/dev/shm").glob(f"howfast-run-{token}-*")]
    for pid in leftovers:  # pgbench works in the killed run's work directory
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        if cwd.is_relative_to("/dev/shm/"):
            memory_dirs.append(Path("/dev/shm") / cwd.relative_to("/dev/shm").parts[0])
    assert cgroup.is_dir()
    proc.kill()
    proc.communicate(timeout=30)
    # Other howfast sessions on this machine (the test suite runs in parallel) would tidy the
    # cgroup up too once its server is gone: hold its owner lock, as its killed owner did, until
    # the howfast under test runs.
    lock = os.open(owner_lock_path(cgroup.name), os.O_RDWR)
    fcntl.flock(lock, fcntl.LOCK_EX)
    foreign = target_dir.parent / "foreign"
    foreign.mkdir()
    (foreign / "data").write_text("not howfast's")
    try:
        busy = howfast("run", "quick", "--target", str(foreign))
        assert busy.returncode == 2 and cgroup.is_dir()  # its server still runs in it
    finally:
        for pid, name in leftovers.items():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGQUIT if name == "postgres" else signal.SIGKILL)
        deadline = time.monotonic() + 30
        while postgres_pids_under(target_dir) and time.monotonic() < deadline:
            time.sleep(0.2)
        # and until the cgroup itself is empty: on a loaded machine its tasks went a moment
        # after the processes left the target, and the next howfast rightly kept it
        while _tasks(cgroup) and time.monotonic() < deadline:
            time.sleep(0.2)
        for directory in memory_dirs:
            assert directory.name.startswith("howfast-"), directory
            shutil.rmtree(directory, ignore_errors=True)
    os.close(lock)
    # Housekeeping is machine-wide, and the suite starts a howfast every few seconds beside
    # this one: another may hold the cgroup's owner lock for a moment while it looks (ours
    # then rightly keeps it), or remove the cgroup first (then it is made again as a killed
    # run leaves it: empty, its owner lock free). Up to five tries, each saying what it saw.
    seen: list[str] = []
    said = _tidy_up_run(howfast, foreign)
    for _ in range(4):
        if cgroup.name in said:
            break
        if cgroup.exists():
            assert _tasks(cgroup) == [], _tasks(cgroup)  # its last task was still leaving?
            seen.append("kept (its owner lock held a moment, or a task leaving)")
        else:
            seen.append("removed first by another howfast")
            cgroup.mkdir()
            os.close(os.open(owner_lock_path(cgroup.name), os.O_RDWR | os.O_CREAT, 0o600))
        said = _tidy_up_run(howfast, foreign)
    print(f"tries before ours removed it: {seen}")
    assert f"removed {cgroup}: an empty cgroup left by a howfast that was killed" in said, (
        seen,
        said,
    )
    assert not cgroup.exists()


def _tidy_up_run(howfast: Howfast, foreign: Path) -> str:
    """A refused run (foreign directory): its housekeeping's messages, unwrapped."""
    out = howfast("run", "quick", "--target", str(foreign))
    assert out.returncode == 2
    return out.stderr.replace("\n", "")  # a long path may be wrapped at any character
