"""Long-lived shells in a pod's containers (hosts/podshell.py), driven here over a real
/bin/sh on this machine: the fake is only the websocket between, a session with the
client's WSClient methods over the shell's pipes (no cluster runs in the unit tests; the lab
tests run the same code against a kubelet)."""

from __future__ import annotations

import os
import select
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from howfast.cancel import CancelToken
from howfast.errors import Aborted, HowfastError
from howfast.hosts import podshell
from howfast.hosts.base import Invocation
from howfast.hosts.pod import ExecResult, PodHost
from howfast.hosts.podshell import PodShells, Reply, command_text, releasable
from howfast.targets.k8s.spec import K8sOptions, parse_target
from howfast.targets.k8s.target import K8sTarget


class PipeSession:
    """A /bin/sh here, read and written as the client's WSClient is (update, peek, read)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            ["/bin/sh"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.streams = {self.proc.stdout.fileno(): "out", self.proc.stderr.fileno(): "err"}
        self.buffers = {"out": b"", "err": b""}
        self.ended: set[str] = set()
        self.closed = False

    def is_open(self) -> bool:
        return not self.closed and len(self.ended) < 2

    def update(self, timeout: float = 0) -> None:
        live = [fd for fd, name in self.streams.items() if name not in self.ended]
        if self.closed or not live:
            return
        readable, _, _ = select.select(live, [], [], timeout)
        for fd in readable:
            data = os.read(fd, 65536)
            if data:
                self.buffers[self.streams[fd]] += data
            else:
                self.ended.add(self.streams[fd])

    def _take(self, name: str) -> str:
        data, self.buffers[name] = self.buffers[name], b""
        return data.decode()

    def peek_stdout(self, timeout: float = 0) -> str:
        return self.buffers["out"].decode()

    def read_stdout(self, timeout: float | None = None) -> str:
        return self._take("out")

    def peek_stderr(self, timeout: float = 0) -> str:
        return self.buffers["err"].decode()

    def read_stderr(self, timeout: float | None = None) -> str:
        return self._take("err")

    def write_stdin(self, data: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data.encode())
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # the shell reads EOF and exits, as the kubelet's does
        self.proc.wait(timeout=10)


class Opener:
    """Opens PipeSessions and remembers them, with the (namespace, pod, container) asked."""

    def __init__(self) -> None:
        self.sessions: list[PipeSession] = []
        self.asked: list[tuple[str, str, str]] = []

    def __call__(self, namespace: str, pod: str, container: str) -> PipeSession:
        self.asked.append((namespace, pod, container))
        session = PipeSession()
        self.sessions.append(session)
        return session


@pytest.fixture
def opener() -> Iterator[Opener]:
    made = Opener()
    yield made
    for session in made.sessions:
        session.close()


def sh(shells: PodShells, script: str, timeout_s: float = 10, pod: str = "p") -> ExecResult:
    return shells.exec("ns", pod, "tools", ["/bin/sh", "-c", script], timeout_s=timeout_s)


def test_a_command_gets_exactly_its_output_and_status(opener: Opener) -> None:
    shells = PodShells(opener)
    out = sh(shells, "printf 'a\\nb'; printf 'oops' >&2; exit 3")
    assert out == ExecResult(3, "a\nb", "oops")
    out = sh(shells, "printf 'line\\n\\n'")  # trailing newlines are the command's
    assert out == ExecResult(0, "line\n\n", "")
    argv = shells.exec("ns", "p", "tools", ["printf", "%s|", "it's", "a b"], timeout_s=10)
    assert argv == ExecResult(0, "it's|a b|", "")  # an argv runs as exec would run it


def test_one_shell_serves_successive_commands(opener: Opener) -> None:
    shells = PodShells(opener)
    for n in range(5):
        assert sh(shells, f"echo {n}").stdout == f"{n}\n"
    assert len(opener.sessions) == 1
    assert opener.asked == [("ns", "p", "tools")]
    sh(shells, "true", pod="other")  # another pod (or container): a shell of its own
    assert opener.asked[-1] == ("ns", "other", "tools")


def test_a_script_cannot_reach_the_shell_that_reads_the_next_one(opener: Opener) -> None:
    """exit, a quote left open in a here-document, cd, a command that reads its stdin (it
    gets /dev/null, not the commands after it), a multi-line script."""
    shells = PodShells(opener)
    assert sh(shells, "cd /; exit 7").returncode == 7
    assert sh(shells, "cat; echo read-nothing").stdout == "read-nothing\n"
    assert sh(shells, "cat <<'EOF'\nit's \"x\n$HOME\nEOF").stdout == "it's \"x\n$HOME\n"
    assert sh(shells, "pwd").stdout.strip() == os.getcwd()  # the cd stayed in its shell
    assert len(opener.sessions) == 1


def test_overlapping_commands_get_shells_of_their_own(opener: Opener) -> None:
    shells = PodShells(opener, keep_idle=1)
    started = threading.Barrier(3)
    results: list[str] = []

    def slow(n: int) -> None:
        started.wait()
        results.append(sh(shells, f"sleep 0.3; echo {n}").stdout)

    threads = [threading.Thread(target=slow, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["0\n", "1\n", "2\n"]
    assert len(opener.sessions) == 3
    open_ones = [s for s in opener.sessions if not s.closed]
    assert len(open_ones) == 1  # keep_idle: the others were closed once done
    sh(shells, "true")
    assert len(opener.sessions) == 3  # the kept one served it


def test_a_dead_idle_shell_is_replaced_and_the_command_runs_once(opener: Opener) -> None:
    shells = PodShells(opener)
    sh(shells, "true")
    opener.sessions[0].proc.kill()  # the pod deleted under an idle shell
    opener.sessions[0].proc.wait()
    out = sh(shells, "echo again")
    assert out == ExecResult(0, "again\n", "")
    assert len(opener.sessions) == 2


def test_a_shell_idle_too_long_is_not_used_again(opener: Opener, monkeypatch) -> None:
    shells = PodShells(opener)
    sh(shells, "true")
    monkeypatch.setattr(podshell, "MAX_IDLE_S", -1.0)  # as if it had waited past the limit
    assert sh(shells, "echo new").stdout == "new\n"
    assert len(opener.sessions) == 2 and opener.sessions[0].closed


def test_a_command_past_its_time_out_fails_and_drops_its_shell(opener: Opener) -> None:
    shells = PodShells(opener)
    with pytest.raises(HowfastError, match=r"no answer in 0\.3 s"):
        sh(shells, "sleep 5", timeout_s=0.3)
    assert opener.sessions[0].closed
    assert sh(shells, "echo fresh").stdout == "fresh\n"
    assert len(opener.sessions) == 2


def test_close_ends_the_idle_shells(opener: Opener) -> None:
    shells = PodShells(opener)
    sh(shells, "true", pod="a")
    sh(shells, "true", pod="b")
    shells.close("a")
    assert [s.closed for s in opener.sessions] == [True, False]
    shells.close()
    assert all(s.closed and s.proc.returncode is not None for s in opener.sessions)


def test_a_shell_in_use_while_closing_is_not_kept(opener: Opener) -> None:
    shells = PodShells(opener)
    done = threading.Event()

    def slow() -> None:
        sh(shells, "sleep 0.3")
        done.set()

    thread = threading.Thread(target=slow)
    thread.start()
    deadline = time.monotonic() + 5
    while not opener.sessions and time.monotonic() < deadline:
        time.sleep(0.01)
    shells.close()  # the target stops while a command is still running
    thread.join()
    assert done.is_set() and opener.sessions[0].closed


def test_the_reply_is_complete_only_with_both_markers() -> None:
    reply = Reply("M")
    reply.out = "x\nM 0\n"
    assert reply.done() is None  # stderr's marker not in yet
    reply.err = "eM\n"
    assert reply.done() == ExecResult(0, "x\n", "e")
    cut = Reply("M", out="half", err="")
    assert cut.partial() == ExecResult(-1, "half", "")
    assert "</dev/null" in command_text("echo 'q'", "M")


class ShellsHere:
    """A pod's exec as RunningPod gives it (targets/k8s/target.py): commands and tools in
    the long-lived shells."""

    def __init__(self, opener: Opener) -> None:
        self.shells = PodShells(opener)
        self.commands = 0  # each one a round trip through the API server on a cluster

    def exec(
        self, namespace: str, pod: str, container: str, command: list[str], *, timeout_s: float
    ) -> ExecResult:
        self.commands += 1
        return self.shells.exec(namespace, pod, container, command, timeout_s=timeout_s)

    def exec_stream(self, namespace: str, pod: str, container: str, command: list[str]) -> Any:
        self.commands += 1
        return self.shells.stream(namespace, pod, container, command)


def test_a_pod_host_s_tool_runs_with_its_files_made_and_collected_by_the_shells(
    tmp_path: Path, opener: Opener
) -> None:
    planned = K8sTarget(parse_target("k8s://fast"), K8sOptions()).planned_pod()
    shells = ShellsHere(opener)
    host = PodHost(replace(planned, work_dir=str(tmp_path / "work")), shells)
    for n in (1, 2):
        work = tmp_path / "here" / "run" / f"step-{n}"
        work.mkdir(parents=True)
        made = Invocation(
            ("sh", "-c", "cat in.txt > out.txt; echo said; echo note >&2"),
            inputs={"in.txt": f"it's {n}\n"},
            outputs=("out.txt",),
        )
        shells.commands = 0
        result = host.run(made, work)
        assert (result.returncode, result.stdout, result.stderr) == (0, "said\n", "note\n")
        assert result.files["out.txt"].read_text() == f"it's {n}\n"
        assert not (tmp_path / "work" / "here" / "run" / f"step-{n}").exists()  # removed after
        assert shells.commands == 2  # made and run; collected and removed
    shells.commands = 0
    assert host.run(Invocation(("true",)), tmp_path / "here" / "run" / "step-1").returncode == 0
    assert shells.commands == 2  # made and run; removed (nothing to collect)
    assert host.free_bytes(tmp_path) is not None
    assert len(opener.sessions) == 1  # made, run, collected, removed, asked: one shell


def pod_host(tmp_path: Path, opener: Opener) -> PodHost:
    planned = K8sTarget(parse_target("k8s://fast"), K8sOptions()).planned_pod()
    return PodHost(replace(planned, work_dir=str(tmp_path / "work")), ShellsHere(opener))


def test_a_tool_s_lines_come_as_it_prints_them_without_the_markers(
    tmp_path: Path, opener: Opener
) -> None:
    host = pod_host(tmp_path, opener)
    work = tmp_path / "step"
    work.mkdir()
    lines: list[tuple[float, str]] = []
    began = time.monotonic()
    script = "printf 'one\\n' >&2; sleep 0.5; printf 'two\\n\\n' >&2; printf out; exit 4"
    result = host.run(
        Invocation(("sh", "-c", script)),
        work,
        on_line=lambda line: lines.append((time.monotonic() - began, line)),
    )
    assert (result.returncode, result.stdout, result.stderr) == (4, "out", "one\ntwo\n\n")
    assert [line for _, line in lines] == ["one", "two", ""]  # as a one-off session gives them
    assert lines[0][0] < lines[1][0]  # the first line came before the tool's end
    no_newline = host.run(Invocation(("sh", "-c", "printf last >&2")), work, on_line=print)
    assert no_newline.stderr == "last"
    assert len(opener.sessions) == 1


def test_an_interrupted_tool_is_stopped_and_its_shell_dropped(
    tmp_path: Path, opener: Opener
) -> None:
    host = pod_host(tmp_path, opener)
    work = tmp_path / "step"
    work.mkdir()
    cancel = CancelToken()
    script = "trap 'echo stopped >&2; exit 130' INT; echo ready >&2; while :; do sleep 0.05; done"

    def on_line(line: str) -> None:
        if line == "ready":
            cancel.cancel("SIGINT")

    with pytest.raises(Aborted):
        host.run(Invocation(("sh", "-c", script)), work, cancel=cancel, on_line=on_line)
    running = opener.sessions[0]
    assert running.closed  # dropped: never handed out mid-command
    assert host.run(Invocation(("echo", "next")), work).stdout == "next\n"


def test_only_what_cannot_be_a_marker_is_released() -> None:
    marker = "howfast-end-1"
    assert releasable("abc\n", marker) == 4  # a whole line at once
    assert releasable("abc\nhow", marker) == 4  # maybe the marker's beginning: held
    assert releasable("abc\nhox", marker) == 7
    assert releasable("abchowfast-end-1 0\n", marker) == 3


def test_a_work_directory_that_cannot_be_made_fails_before_the_tool_runs(
    tmp_path: Path, opener: Opener
) -> None:
    blocked = tmp_path / "work"
    blocked.write_text("a file where the work volume should be")  # mkdir -p fails under it
    planned = K8sTarget(parse_target("k8s://fast"), K8sOptions()).planned_pod()
    host = PodHost(replace(planned, work_dir=str(blocked)), ShellsHere(opener))
    ran = tmp_path / "ran"
    with pytest.raises(HowfastError, match=r"cannot prepare .* in pod .*: .*Not a directory"):
        host.run(Invocation(("touch", str(ran)), inputs={"in.txt": "x"}), tmp_path / "step")
    assert not ran.exists()
    # a tool that exits with the same status and says something else is the tool's result
    host = PodHost(replace(planned, work_dir=str(tmp_path / "good")), ShellsHere(opener))
    said = host.run(Invocation(("sh", "-c", "echo mine >&2; exit 125")), tmp_path / "step-2")
    assert (said.returncode, said.stderr) == (125, "mine\n")
