"""Small process helpers: run an argv, log with elapsed time, identify a PID safely."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

_T0 = time.monotonic()


class LabError(RuntimeError):
    """The lab could not do what was asked; the message says why."""


class LabUnavailable(LabError):
    """This machine cannot run the lab (no root, no Go, ...): tests skip with this reason."""


def log(msg: str) -> None:
    print(f"[k8s-lab {time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    check: bool = True,
    capture: bool = True,
    log_file: Path | None = None,
    timeout: float | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one command (an argument list, never a shell string)."""
    args = [os.fspath(a) for a in argv]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with log_file.open("a") as out:
            out.write(f"$ {' '.join(args)}\n")
            out.flush()
            proc = subprocess.run(
                args,
                env=None if env is None else dict(env),
                cwd=cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=timeout,
                input=input,
                stdin=None if input is not None else subprocess.DEVNULL,
            )
    else:
        proc = subprocess.run(
            args,
            env=None if env is None else dict(env),
            cwd=cwd,
            capture_output=capture,
            text=True,
            timeout=timeout,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout or "").strip()[-2000:] if capture else ""
        where = f" (log: {log_file})" if log_file else ""
        raise LabError(f"command failed ({proc.returncode}): {' '.join(args)}{where}\n{detail}")
    return proc


@contextlib.contextmanager
def locked(lock_file: Path, what: str) -> Iterator[None]:
    """Held while a build shared by every checkout on the machine (in the user's cache) is
    made: a second `make test` started meanwhile waits for the first's build, then finds it
    done, instead of building into the same files."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another build of {what} ({lock_file})")
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


def proc_start_time(pid: int) -> int | None:
    """The kernel's start time of a process (clock ticks since boot), None if it is gone.

    A PID plus its start time names one process for good: a recycled PID has another start time.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # a zombie is as good as gone
        return None
    return int(fields[19])


def is_same_process(pid: int, start_time: int) -> bool:
    return proc_start_time(pid) == start_time


def stop_processes(procs: Sequence[tuple[str, int, int]], grace: float = 5.0) -> None:
    """SIGTERM each (name, pid, start_time) still alive, wait up to `grace`, then SIGKILL."""
    alive = [(n, p, s) for n, p, s in procs if is_same_process(p, s)]
    for _, pid, _ in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [(n, p, s) for n, p, s in alive if is_same_process(p, s)]
    for name, pid, _ in alive:
        log(f"{name} (pid {pid}) ignored SIGTERM for {grace:.0f}s: SIGKILL")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [(n, p, s) for n, p, s in alive if is_same_process(p, s)]


def wait_until(
    what: str, check: Callable[[], object], timeout: float, interval: float = 0.25
) -> None:
    """Poll `check()` (a callable returning truthy when ready) until it holds or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except (OSError, LabError, subprocess.SubprocessError):
            pass
        if time.monotonic() > deadline:
            raise LabError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
