"""Long-lived shells in a pod's containers, so that a command (a sampler's reading, a work
directory made or collected, a tool's run) costs a write and a read on an open exec session
rather than a session of its own: opening one goes through the API server, the kubelet and the
container runtime (a TLS handshake, a websocket, a `runc exec`), 0.1-0.3 s each on the lab.

    shells = PodShells(open_shell)      # open_shell(namespace, pod, container): a session
    out = shells.exec(namespace, pod, container, ["cat", "/proc/stat"], timeout_s=10)
    running = shells.stream(namespace, pod, container, argv)   # read as PodHost.run reads
    shells.close()                      # when the pod goes (or close(pod) for one pod)

Each shell is `/bin/sh` reading commands on its stdin. A command runs as
`/bin/sh -c SCRIPT </dev/null` (the script quoted whole, so that nothing in it can reach the
shell that reads the next one, nor read the commands after it), then the shell prints a
marker with the exit status on stdout and a marker on stderr, right after the command's
output (no newline of their own before them): the output before the markers is the
command's, exactly, and a line it ends with a newline can be handed on at once. A shell
serves one command at a time; commands that overlap (the samplers' threads, the step's own)
each get a shell of their own, opened when none is idle, and at most KEEP_IDLE of them stay
open per container. A tool interrupted while it runs (Ctrl-C, a time-out) drops its shell.

A session that fails (the pod deleted by an event, the API server gone) is dropped; a command
that got no answer at all from a shell found idle is sent once more on a new shell (every
command sent here can run twice: reads, mkdir, writing the same inputs, rm). A command that
outlives its time-out drops its shell, as a one-off exec session would be closed.
"""

from __future__ import annotations

import contextlib
import functools
import re
import secrets
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from howfast.errors import HowfastError
from howfast.hosts.pod import ExecResult

KEEP_IDLE = 4  # shells kept open per container between commands
# A shell idle for longer is closed rather than used: a connection that a proxy dropped
# without a word would only show it by a command's time-out.
MAX_IDLE_S = 60.0
READ_SLICE_S = 1.0  # how long one wait for output blocks (a time-out is checked between)


class ShellSession(Protocol):
    """What a shell needs of an exec session with stdin (the client's WSClient)."""

    def is_open(self) -> bool: ...
    def update(self, timeout: float = 0) -> None: ...
    def peek_stdout(self, timeout: float = 0) -> str: ...
    def read_stdout(self, timeout: float | None = None) -> str: ...
    def peek_stderr(self, timeout: float = 0) -> str: ...
    def read_stderr(self, timeout: float | None = None) -> str: ...
    def write_stdin(self, data: str) -> None: ...
    def close(self) -> None: ...


OpenShell = Callable[[str, str, str], ShellSession]  # (namespace, pod, container) -> session


def command_text(script: str, marker: str) -> str:
    """What the long-lived shell is sent for one script: run it in a shell of its own with
    no stdin, then mark the end of its output on both streams (stdout with the status)."""
    return (
        f"/bin/sh -c {shlex.quote(script)} </dev/null; "
        f"printf '%s %s\\n' {marker} \"$?\"; printf '%s\\n' {marker} >&2\n"
    )


def script_of(command: list[str]) -> str:
    """An argv as a shell script that runs exactly it (found on PATH as exec finds it)."""
    return shlex.join(command)


@dataclass
class Reply:
    """The output read so far for one command, and whether both markers came."""

    marker: str
    out: str = ""
    err: str = ""

    def done(self) -> ExecResult | None:
        """The command's result once both of its markers are in; None before."""
        status = re.search(rf"{re.escape(self.marker)} (\d+)\n\Z", self.out)
        err_end = f"{self.marker}\n"
        if status is None or not self.err.endswith(err_end):
            return None
        return ExecResult(
            int(status.group(1)), self.out[: status.start()], self.err[: -len(err_end)]
        )

    def anything(self) -> bool:
        return bool(self.out or self.err)

    def partial(self) -> ExecResult:
        """What a shell said before its session ended mid-command, as a one-off exec's
        result reads when the API server cuts it (status -1)."""
        out = self.out.split(self.marker)[0]
        err = self.err.split(self.marker)[0]
        return ExecResult(-1, out, err)


class PodShell:
    """One long-lived shell; used by one thread at a time (PodShells hands it out)."""

    def __init__(self, session: ShellSession) -> None:
        self.session = session
        self.marker = f"howfast-end-{secrets.token_hex(8)}"
        self.idle_since = time.monotonic()

    def alive(self) -> bool:
        """Whether the session is still open, after reading what it has pending (a close
        frame the API server sent while it was idle), and was not idle too long."""
        if time.monotonic() - self.idle_since > MAX_IDLE_S:
            return False
        try:
            self.session.update(timeout=0)
            return bool(self.session.is_open())
        except Exception:
            return False

    def run(self, script: str, timeout_s: float, what: str) -> tuple[ExecResult, bool]:
        """(result, whether the shell can serve another command). Raises HowfastError after
        `timeout_s` without the end of the output (the shell is then unusable)."""
        reply = Reply(self.marker)
        self.session.write_stdin(command_text(script, self.marker))
        deadline = time.monotonic() + timeout_s
        while True:
            self._drain(reply)
            result = reply.done()
            if result is not None:
                return result, True
            if not self.session.is_open():
                self._drain(reply)
                result = reply.done()
                return (reply.partial(), False) if result is None else (result, False)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise HowfastError(f"{what}: no answer in {timeout_s:g} s")
            self.session.update(timeout=min(READ_SLICE_S, remaining))

    def _drain(self, reply: Reply) -> None:
        if self.session.peek_stdout():
            reply.out += self.session.read_stdout()
        if self.session.peek_stderr():
            reply.err += self.session.read_stderr()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.session.close()


class PodShells:
    """The idle shells of each container, opened on demand (see the module's docstring)."""

    def __init__(self, open_shell: OpenShell, keep_idle: int = KEEP_IDLE) -> None:
        self.open_shell = open_shell
        self.keep_idle = keep_idle
        self._lock = threading.Lock()
        self._idle: dict[tuple[str, str, str], list[PodShell]] = {}
        self._generation = 0  # close() bumps it: shells in use then are not kept after

    def exec(
        self, namespace: str, pod: str, container: str, command: list[str], *, timeout_s: float
    ) -> ExecResult:
        """Run a short command in the container; its whole output (as a one-off exec)."""
        key = (namespace, pod, container)
        what = f"{' '.join(command[:3])} in pod {pod}"
        script = script_of(command)
        for attempt in (1, 2):
            shell, reused, generation = self._take(key)
            try:
                result, reusable = shell.run(script, timeout_s, what)
            except HowfastError:
                shell.close()
                raise
            except Exception as exc:  # the session broke while being written to or read
                shell.close()
                if reused and attempt == 1:
                    continue  # an idle shell whose session had died: once more, on a new one
                raise HowfastError(f"{what}: the exec session failed: {exc}") from None
            if not reusable:
                shell.close()
                if reused and attempt == 1 and result.stdout == result.stderr == "":
                    continue  # it ended without a word: a dead idle shell, not the command
                return result
            self._give_back(key, shell, generation)
            return result
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def stream(self, namespace: str, pod: str, container: str, command: list[str]) -> ShellCommand:
        """A command in a shell, read as it runs (a tool: its progress on stderr), through
        the methods PodHost.run reads a one-off exec session with."""
        key = (namespace, pod, container)
        for attempt in (1, 2):
            shell, reused, generation = self._take(key)
            try:
                shell.session.write_stdin(command_text(script_of(command), shell.marker))
            except Exception as exc:
                shell.close()
                if reused and attempt == 1:
                    continue  # an idle shell whose session had died: once more, on a new one
                raise HowfastError(f"exec in pod {pod}: the exec session failed: {exc}") from None
            return ShellCommand(
                shell, functools.partial(self._give_back, key, generation=generation)
            )
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _take(self, key: tuple[str, str, str]) -> tuple[PodShell, bool, int]:
        """An idle shell of the container that is still alive, else a new one."""
        while True:
            with self._lock:
                generation = self._generation
                idle = self._idle.get(key)
                shell = idle.pop() if idle else None
            if shell is None:
                return PodShell(self.open_shell(*key)), False, generation
            if shell.alive():
                return shell, True, generation
            shell.close()

    def _give_back(self, key: tuple[str, str, str], shell: PodShell, generation: int) -> None:
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if generation == self._generation and len(idle) < self.keep_idle:
                shell.idle_since = time.monotonic()
                idle.append(shell)
                return
        shell.close()

    def close(self, pod: str | None = None) -> None:
        """Close the idle shells (of one pod, or all); shells in use are closed when their
        command ends."""
        with self._lock:
            if pod is None:
                self._generation += 1
                closing = [s for shells in self._idle.values() for s in shells]
                self._idle.clear()
            else:
                keys = [k for k in self._idle if k[1] == pod]
                closing = [s for k in keys for s in self._idle.pop(k)]
                self._generation += 1
        for shell in closing:
            shell.close()


def releasable(text: str, marker: str) -> int:
    """How much of `text` is surely the command's: all before its marker, or before a tail
    that may be the marker's beginning (it comes in pieces). A line that ends in a newline
    is released at once: the marker begins with no newline of its own."""
    found = text.find(marker)
    if found >= 0:
        return found
    for start in range(max(0, len(text) - len(marker) + 1), len(text)):
        if marker.startswith(text[start:]):
            return start
    return len(text)


class ShellCommand:
    """One command running in a shell, read as a one-off exec session is (is_open, update,
    peek_ and read_stdout and _stderr, returncode, close): its output without the markers,
    released as it comes. Closed once done, the shell goes back to its pool; closed before
    (a tool interrupted, a time-out), the shell is dropped."""

    def __init__(self, shell: PodShell, give_back: Callable[[PodShell], None]) -> None:
        self.shell = shell
        self.give_back = give_back
        self.reply = Reply(shell.marker)
        self.result: ExecResult | None = None
        self.ended = False  # the session ended before the command's markers came
        self.closed = False
        self.sent_out = 0
        self.sent_err = 0

    def is_open(self) -> bool:
        return self.result is None and not self.ended

    def update(self, timeout: float = 0) -> None:
        if not self.is_open():
            return
        try:
            self.shell.session.update(timeout=timeout)
            self.shell._drain(self.reply)
            self.result = self.reply.done()
            if self.result is None and not self.shell.session.is_open():
                self.ended = True
        except Exception:  # the session broke: what came is kept, the status is unknown
            self.ended = True

    def _limit(self, text: str, marker: str, done: str | None) -> int:
        return len(done) if done is not None else releasable(text, marker)

    def peek_stdout(self, timeout: float = 0) -> str:
        done = self.result.stdout if self.result is not None else None
        end = self._limit(self.reply.out, self.shell.marker, done)
        return self.reply.out[self.sent_out : end]

    def read_stdout(self, timeout: float | None = None) -> str:
        text = self.peek_stdout()
        self.sent_out += len(text)
        return text

    def peek_stderr(self, timeout: float = 0) -> str:
        done = self.result.stderr if self.result is not None else None
        end = self._limit(self.reply.err, self.shell.marker, done)
        return self.reply.err[self.sent_err : end]

    def read_stderr(self, timeout: float | None = None) -> str:
        text = self.peek_stderr()
        self.sent_err += len(text)
        return text

    @property
    def returncode(self) -> int | None:
        return self.result.returncode if self.result is not None else None

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.result is not None and not self.ended:
            self.give_back(self.shell)
        else:
            self.shell.close()
