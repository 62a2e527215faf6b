"""The local host runs real processes: inputs written first, outputs collected, stderr lines
streamed, and a cancel token (set from another thread, as a signal handler does) stops the
tool by its PID and raises Aborted."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from howfast.cancel import CancelToken
from howfast.errors import Aborted
from howfast.hosts.base import Invocation
from howfast.hosts.local import ClientHost, LocalHost

PY = sys.executable


def test_run_writes_inputs_collects_outputs_and_streams_stderr(tmp_path: Path):
    script = (
        "import sys, pathlib\n"
        "text = pathlib.Path('job.txt').read_text()\n"
        "pathlib.Path('out/result.txt').write_text(text.upper())\n"
        "print('line one', file=sys.stderr); print('line two', file=sys.stderr)\n"
        "print('done')\n"
    )
    invocation = Invocation(
        (PY, "-c", script),
        dirs=("out",),
        inputs={"job.txt": "hello"},
        outputs=("out/*",),
    )
    lines: list[str] = []
    result = LocalHost().run(invocation, tmp_path, on_line=lines.append)
    assert result.returncode == 0 and result.stdout == "done\n"
    assert lines == ["line one", "line two"]
    assert set(result.files) == {"out/result.txt"}
    assert result.files["out/result.txt"].read_text() == "HELLO"


def test_secret_environment_reaches_the_tool_but_never_its_description(tmp_path: Path):
    invocation = Invocation(
        (PY, "-c", "import os; print(os.environ['PGPASSWORD'], os.environ['PGSSLMODE'])"),
        env={"PGSSLMODE": "require"},
        secret_env={"PGPASSWORD": "s3cret"},
    )
    result = LocalHost().run(invocation, tmp_path)
    assert result.stdout.split() == ["s3cret", "require"]
    described = repr(invocation) + repr(invocation.document())
    assert "s3cret" not in described
    assert invocation.document()["secret_env"] == ["PGPASSWORD"]


def test_cancel_token_stops_the_tool_by_pid_from_another_thread(tmp_path: Path):
    pid_file = tmp_path / "pid"
    invocation = Invocation(
        (PY, "-c", f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
         "time.sleep(60)"),
    )  # fmt: skip
    token = CancelToken()
    started: list[int] = []
    threading.Timer(1.0, token.cancel, args=("SIGTERM",)).start()
    began = time.monotonic()
    with pytest.raises(Aborted) as raised:
        LocalHost().run(invocation, tmp_path, cancel=token, on_start=started.append)
    assert raised.value.signal_name == "SIGTERM"
    assert time.monotonic() - began < 15
    (pid,) = started
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped and reaped: nothing left running


def test_client_host_says_what_it_cannot_know_of_a_remote_server(tmp_path: Path):
    host = ClientHost()
    memory = host.server_memory(None)
    assert isinstance(memory, str) and "--dataset SIZE" in memory
    assert host.role_devices({"data": tmp_path}) == []
    assert host.drop_caches() is not None
    local = LocalHost().server_memory(None)
    assert not isinstance(local, str) and local.bytes > 0


def test_no_workload_starts_processes_or_reads_proc_itself():
    """Tools run through a Host; only hosts/ touches processes and /proc."""
    workloads = Path(__file__).parents[2] / "src" / "howfast" / "workloads"
    offenders = [
        f"{path.relative_to(workloads)}:{number}"
        for path in sorted(workloads.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if "subprocess" in line or "/proc/" in line
    ]
    assert offenders == []


def test_no_thread_of_howfast_starts_while_the_child_starts(tmp_path: Path, monkeypatch):
    # Why it matters: a thread created as pgbench starts tilts where the scheduler places
    # pgbench and its backends (docs/commands/run.md); the readers and the timer come first.
    # Sets, not counts: a thread left by an earlier test in this worker may end meanwhile.
    seen: dict[str, set[threading.Thread]] = {}
    real_popen = subprocess.Popen

    class CountingPopen(real_popen):
        def __init__(self, *args, **kwargs):
            seen["at child start"] = set(threading.enumerate())
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", CountingPopen)
    invocation = Invocation((PY, "-c", "print('out'); import sys; print('err', file=sys.stderr)"),
                            timeout_s=60)  # fmt: skip
    result = LocalHost().run(
        invocation, tmp_path, on_start=lambda pid: seen.update(after=set(threading.enumerate()))
    )
    assert result.stdout == "out\n" and result.stderr == "err\n"
    assert seen["after"] - seen["at child start"] == set()


def test_a_time_out_stops_the_child_and_says_so(tmp_path: Path):
    invocation = Invocation((PY, "-c", "import time; time.sleep(60)"), timeout_s=0.5)
    started: list[int] = []
    began = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        LocalHost().run(invocation, tmp_path, on_start=started.append)
    assert time.monotonic() - began < 10
    with pytest.raises(ProcessLookupError):
        os.kill(started[0], 0)


def test_a_missing_program_leaves_no_thread_or_pipe(tmp_path: Path):
    # Sets, not counts: a thread left by an earlier test in this worker may end meanwhile.
    fds = set(os.listdir("/proc/self/fd"))
    threads = set(threading.enumerate())
    invocation = Invocation((str(tmp_path / "no-such-tool"),), timeout_s=60)
    with pytest.raises(FileNotFoundError):
        LocalHost().run(invocation, tmp_path)
    deadline = time.monotonic() + 5
    while set(threading.enumerate()) - threads and time.monotonic() < deadline:
        time.sleep(0.01)
    assert set(threading.enumerate()) - threads == set()
    assert set(os.listdir("/proc/self/fd")) - fds == set()
