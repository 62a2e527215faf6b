"""Fixtures for tests that run the real howfast command against real PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import shared_tmpdir

# 1 s steps: what the tests using this plan check (statuses, figures, percentiles, cleanup)
# needs transactions, not seconds. At full speed the first step of each mode is preceded by an
# unmeasured calibration run as long as the step, up to 2 s (workloads/pgbench/logsampling.py),
# so each second there costs two.
TINY_PLAN_AT_FULL_SPEED = """
description = "tiny plan for tests"
[settings]
shared_buffers = "32MB"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only", "tpcb-like", "simple-update"]
clients = [2]
duration = "1s"
"""

# The same at 500 transactions a second: no calibration run (the offered rate says how much
# log to keep) and no pgbench flat out on both cores. A whole run of it took 2.5-3.3 s of CPU,
# servers included, against 10.3-10.8 s at full speed (measured here, interleaved). None of
# the tests using it checks throughput; the full-speed path, calibration and sampled log,
# is checked by test_dry_run (every invocation), test_pgbench_log and the plans of their own.
TINY_PLAN = TINY_PLAN_AT_FULL_SPEED + "rate = 500\n"


# The built-in quick plan (src/howfast/plans/builtin/quick.toml) without its fio probe: for
# tests of what happens during quick's pgbench steps (events, Ctrl-C), given the same options
# as `run quick`. The probe's two fio jobs (a 128 MiB file written and 5 s measured, each)
# took 12-15 s of each such test and none of them looks at it; quick itself, probe included,
# still runs whole in test_replicas.py (with a standby).
QUICK_WITHOUT_FIO = """
description = "quick without its fio probe"
[settings]
shared_buffers = "128MB"
max_wal_size = "1GB"
[[steps]]
workload = "pgbench-init"
scale = 10
[[steps]]
workload = "pgbench"
modes = ["select-only", "tpcb-like"]
clients = [1, 2, 4, 8]
duration = "10s"
"""

# A test's time-out (its own, or pytest's 300 s) ends howfast as a user would, with SIGINT,
# so that howfast takes down what it built (servers, emulated volumes, cgroups); only a
# howfast still there STOP_GRACE_S later is killed. A SIGKILLed howfast leaves its volume
# mounted, its loop device attached and its /dev/shm directories behind (issue 26): the
# time-outs below leave room for that grace inside pytest's 300 s (240 + 45).
STOP_GRACE_S = 45.0


def stop_howfast(proc: subprocess.Popen[str], grace_s: float = STOP_GRACE_S) -> tuple[str, str]:
    """SIGINT, wait up to `grace_s` for howfast to clean up and exit, then SIGKILL; what it
    printed. Whatever interrupts the wait (pytest's time-out) still ends in a SIGKILL."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return out or "", (err or "") + f"\n(killed: it still ran {grace_s:g} s after SIGINT)"
    except BaseException:
        proc.kill()
        raise
    return out or "", err or ""


def wait_for(proc: subprocess.Popen[str], text: str, timeout: float = 150) -> str:
    """Read howfast's stderr until a line holds `text`; what was read."""
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


def finish(proc: subprocess.Popen[str], input: str | None, timeout: float) -> tuple[str, str]:
    """Wait for howfast; past `timeout`, or when the test is ended meanwhile, stop it."""
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _, err = stop_howfast(proc)
        command = " ".join(str(a) for a in proc.args[3:])  # type: ignore[index]
        raise AssertionError(
            f"howfast {command} still ran after {timeout:g} s: interrupted (SIGINT), "
            f"exit status {proc.returncode}\n{err[-4000:]}"
        ) from None
    except BaseException:
        stop_howfast(proc)
        raise
    return out, err


@dataclass
class Howfast:
    store: Path
    workdir: Path
    started: list[subprocess.Popen[str]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return {**os.environ, "HOWFAST_STORE": str(self.store), "PYTHONUNBUFFERED": "1"}

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "howfast", *args]

    def __call__(
        self, *args: str, input: str | None = None, timeout: float = 240
    ) -> subprocess.CompletedProcess[str]:
        proc = self.popen(*args, stdin=subprocess.PIPE if input is not None else None)
        out, err = finish(proc, input, timeout)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def together(
        self, *commands: list[str], timeout: float = 240
    ) -> list[subprocess.CompletedProcess[str]]:
        """Independent commands (reads of the store, refusals) started at once, then waited
        for in order: each howfast spends its first second or more starting its interpreter
        and importing, which one after the other added up in the tests that run several."""
        procs = [self.popen(*argv) for argv in commands]
        done = []
        for proc in procs:
            out, err = finish(proc, None, timeout)
            done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
        return done

    def popen(self, *args: str, stdin: int | None = None) -> subprocess.Popen[str]:
        """howfast in the background; the fixture stops it (SIGINT first) if the test ends
        while it still runs."""
        proc = subprocess.Popen(
            self.argv(*args),
            env=self.env(),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.workdir,
        )
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                stop_howfast(proc)

    def in_private_shm(self, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
        """Run howfast with a /dev/shm of its own (tests/integration/private_shm.py); returns
        what it left there. Root only. The wrapper passes SIGINT on to howfast."""
        result = self.workdir / "shm-left.json"
        wrapper = str(Path(__file__).with_name("private_shm.py"))
        argv = ["unshare", "--mount", "--propagation", "private", sys.executable, wrapper,
                str(result), "--", *self.argv(*args)]  # fmt: skip
        proc = subprocess.Popen(argv, env=self.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=self.workdir)  # fmt: skip
        self.started.append(proc)
        out, err = finish(proc, None, 240)
        left = json.loads(result.read_text()) if result.exists() else ["(the wrapper failed)"]
        return subprocess.CompletedProcess(argv, proc.returncode, out, err), left

    def plan(self, text: str, name: str = "tiny.toml") -> Path:
        path = self.workdir / name
        path.write_text(text)
        return path

    def fastest_transaction_ms(self, run_id: str) -> dict[str, float]:
        """Each pgbench step's fastest transaction, by target, from its exact latency
        histogram (`results show --series`). Other work on the machine only adds to a
        transaction: the fastest is the one it did not delay."""
        shown = self("results", "show", run_id, "--json", "--series")
        assert shown.returncode == 0, shown.stderr[-3000:]
        fastest = {}
        for step in json.loads(shown.stdout)["steps"]:
            if step["workload"] == "pgbench":
                latencies = step["histograms"]["latency_us"]
                assert latencies, f"no latency histogram: {step['target']}"
                fastest[step["target"]] = min(int(us) for us in latencies) / 1000
        return fastest


@pytest.fixture
def howfast(tmp_path: Path) -> Iterator[Howfast]:
    runner = Howfast(store=tmp_path / "results.db", workdir=tmp_path)
    try:
        yield runner
    finally:
        runner.stop_all()


def remove_leftovers(target: Path) -> str:
    """What a killed howfast left for this target directory (a volume still mounted would
    make rmtree descend into it), removed by `howfast cleanup`; what it said, or ''."""
    mounted = any(
        f" {target}/" in line for line in Path("/proc/self/mounts").read_text().splitlines()
    )
    if not mounted and not any(target.glob("howfast-*")):
        return ""
    out = subprocess.run(
        [sys.executable, "-m", "howfast", "cleanup", "--target", str(target), "--yes"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return out.stdout + out.stderr


@pytest.fixture
def target_dir(request: pytest.FixtureRequest) -> Iterator[Path]:
    """An empty directory the unprivileged PostgreSQL user can reach. Whatever a howfast
    killed by a test's time-out left there is removed with `howfast cleanup` afterwards."""
    base = shared_tmpdir("howfast-target-")
    target = base / "bench"
    target.mkdir()
    target.chmod(0o755)
    try:
        yield target
    finally:
        if "howfast" in request.fixturenames:  # a howfast still running there stops first
            runner = request.getfixturevalue("howfast")
            runner.stop_all()
        remove_leftovers(target)
        shutil.rmtree(base, ignore_errors=True)


def postgres_pids_under(path: Path) -> list[int]:
    """PIDs of processes whose command line mentions `path` or whose working directory is
    inside it (every PostgreSQL process chdirs to its data directory)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if str(path) in cmdline or cwd.startswith(str(path)):
            pids.append(int(proc.name))
    return pids


def shared_memory_of(pid: int) -> set[str]:
    """The shared memory a running PostgreSQL process has mapped, named as
    postgres_shared_memory() names it: what its server would leave behind if killed. Tests
    take it before the kill, so that other servers on the machine do not count."""
    found: set[str] = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        path = fields[5] if len(fields) == 6 else ""
        if path.startswith("/dev/shm/PostgreSQL."):
            found.add(f"file {path.removeprefix('/dev/shm/')}")
        elif path.startswith("/SYSV"):
            found.add(f"sysv {fields[4]}")  # a System V segment's inode is its shmid
    return found


def postgres_shared_memory() -> set[str]:
    """PostgreSQL's shared memory that outlives a killed server: /dev/shm/PostgreSQL.* files
    (dynamic shared memory) and System V segments (by id)."""
    found = {f"file {p.name}" for p in Path("/dev/shm").glob("PostgreSQL.*")}
    with contextlib.suppress(OSError):
        lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
        found |= {f"sysv {line.split()[1]}" for line in lines if line.split()}
    return found
