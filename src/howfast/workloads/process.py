"""Running a tool as a child process: argv lists only, own session, stopped by PID on abort."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass
class ToolResult:
    returncode: int
    stdout: str
    stderr: str


def run_tool(
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    on_stderr_line: Callable[[str], None] | None = None,
    timeout_s: float | None = None,
    on_start: Callable[[int], None] | None = None,
) -> ToolResult:
    """Run argv to completion, feeding stderr lines to `on_stderr_line` as they come;
    `on_start` learns the child's PID. On any exception (Aborted included) the child is
    interrupted, then killed, by its PID."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        start_new_session=True,  # the terminal's Ctrl-C reaches howfast only
        text=True,
        errors="replace",
    )
    err_lines: list[str] = []
    out_chunks: list[str] = []

    def pump_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err_lines.append(line)
            if on_stderr_line:
                on_stderr_line(line.rstrip("\n"))

    def pump_stdout() -> None:
        assert proc.stdout is not None
        out_chunks.append(proc.stdout.read())

    threads = [threading.Thread(target=f, daemon=True) for f in (pump_stderr, pump_stdout)]
    for t in threads:
        t.start()
    try:
        if on_start:
            on_start(proc.pid)
        proc.wait(timeout=timeout_s)
    except BaseException:
        stop_process(proc)
        raise
    for t in threads:
        t.join(timeout=5)
    return ToolResult(proc.returncode, "".join(out_chunks), "".join(err_lines))


def stop_process(proc: subprocess.Popen[str], grace_s: float = 5.0) -> None:
    """SIGINT (pgbench and fio stop cleanly on it), then SIGKILL, to this PID only."""
    if proc.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGKILL, 5.0)):
        try:
            proc.send_signal(sig)
            proc.wait(timeout=wait_s)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue
