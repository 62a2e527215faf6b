"""This machine as a host: tools are child processes (argv lists only, each in its own
session, stopped by PID), facts come from /proc, /sys and the filesystem.

`ClientHost` runs the tools here for a server that lives elsewhere (a postgresql:// target):
what it cannot know about that server's machine it says, rather than answering with this
machine's figures.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from howfast.cancel import NEVER, CancelToken
from howfast.diskcounters import parse_diskstats
from howfast.errors import Aborted
from howfast.hosts.base import Host, Invocation, LineHandler, StartHandler, ToolResult
from howfast.machine.cgroup import IoCgroup
from howfast.machine.devices import RoleDevice, resolve_roles
from howfast.machine.fsinfo import describe_path
from howfast.machine.fsinfo import same_filesystem as _same_filesystem
from howfast.machine.memory import MemoryBasis, memory_basis
from howfast.machine.pgbin import PgInstall

PROC = Path("/proc")
DROP_CACHES = Path("/proc/sys/vm/drop_caches")
STOP_GRACE_S = 5.0
_DIRECT_PROBE_FILE = ".howfast-direct-io-probe"
_DIRECT_BLOCK = 4096  # one aligned block: what every O_DIRECT-capable device accepts


def run_process(
    invocation: Invocation,
    work_dir: Path,
    *,
    cancel: CancelToken = NEVER,
    on_line: LineHandler | None = None,
    on_start: StartHandler | None = None,
    spawn: Callable[[Callable[[], subprocess.Popen[str]]], subprocess.Popen[str]] | None = None,
) -> ToolResult:
    """Run an invocation as a child process in `work_dir`. On cancellation or any exception
    (Aborted included) the child is interrupted, then killed, by its PID.

    The pipe readers and the time-out timer are threads started before the child, so that
    while it starts howfast has no thread of its own ready to run. That moment is when the
    scheduler places pgbench's threads and the backends they connect to; a thread created
    then tilted the placement: on a 2-core VM, 4-client select-only runs started this way
    ran with pgbench split from its backends (about 20% fewer TPS) more often than bare
    pgbench's (docs/commands/run.md)."""
    for name in invocation.dirs:
        (work_dir / name).mkdir(parents=True, exist_ok=True)
    for name, text in invocation.inputs.items():
        (work_dir / name).write_text(text)

    err_lines: list[str] = []
    out_chunks: list[str] = []
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()

    def pump_stderr() -> None:
        with open(err_read, errors="replace") as stream:
            for line in stream:
                err_lines.append(line)
                if on_line:
                    on_line(line.rstrip("\n"))

    def pump_stdout() -> None:
        with open(out_read, errors="replace") as stream:
            out_chunks.append(stream.read())

    threads = [threading.Thread(target=f, daemon=True) for f in (pump_stderr, pump_stdout)]
    for t in threads:
        t.start()

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            list(invocation.argv),
            stdin=subprocess.DEVNULL,
            stdout=out_write,
            stderr=err_write,
            env={**os.environ, **invocation.env, **invocation.secret_env},
            cwd=work_dir,
            start_new_session=True,  # the terminal's Ctrl-C reaches howfast only
            text=True,  # no pipes of its own: for the Popen[str] that `spawn` passes on
        )

    with _Deadline(invocation.timeout_s) as deadline:
        try:
            proc = spawn(start) if spawn else start()
        finally:  # the child has its copies; the readers see the end when it exits
            os.close(out_write)
            os.close(err_write)
        try:
            if on_start:
                on_start(proc.pid)
            _wait(proc, deadline, cancel)
        except BaseException:
            stop_process(proc)
            raise
    for t in threads:
        t.join(timeout=5)
    files = {
        str(path.relative_to(work_dir)): path
        for pattern in invocation.outputs
        for path in sorted(work_dir.glob(pattern))
        if path.is_file()
    }
    return ToolResult(proc.returncode, "".join(out_chunks), "".join(err_lines), files)


class _Deadline:
    """The time-out of one child: a timer thread started before the child (see run_process)
    that interrupts it once it is known; leaving the `with` block stops the timer."""

    def __init__(self, timeout_s: float | None) -> None:
        self.timeout_s = timeout_s
        self.expired = threading.Event()
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(timeout_s, self._expire) if timeout_s is not None else None
        if self._timer is not None:
            self._timer.daemon = True
            self._timer.start()

    def watch(self, proc: subprocess.Popen[str]) -> None:
        with self._lock:
            self._proc = proc
            expired = self.expired.is_set()
        if expired:  # it passed while the child was being started
            _interrupt(proc)

    def _expire(self) -> None:
        with self._lock:
            self.expired.set()
            proc = self._proc
        if proc is not None:
            _interrupt(proc)

    def __enter__(self) -> _Deadline:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _wait(proc: subprocess.Popen[str], deadline: _Deadline, cancel: CancelToken) -> None:
    """Wait for the child without polling: cancellation and the time-out interrupt it (then
    kill it after a grace period) from elsewhere, and the blocking wait returns."""
    unregister = cancel.on_cancel(lambda: _interrupt(proc))
    deadline.watch(proc)
    try:
        proc.wait()
    finally:
        unregister()
    if cancel.cancelled:
        raise Aborted(cancel.reason or "cancelled")
    if deadline.expired.is_set():
        raise subprocess.TimeoutExpired(proc.args, deadline.timeout_s or 0.0)


def _interrupt(proc: subprocess.Popen[str], grace_s: float = STOP_GRACE_S) -> None:
    """SIGINT now, SIGKILL after `grace_s` if it still runs; returns at once (it may run in a
    signal handler)."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGINT)

    def kill() -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

    timer = threading.Timer(grace_s, kill)
    timer.daemon = True
    timer.start()


def stop_process(proc: subprocess.Popen[str], grace_s: float = STOP_GRACE_S) -> None:
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


class LocalHost(Host):
    """Tools and server on this machine."""

    name = "local"
    follows_files = True

    def __init__(self, install: PgInstall | None = None, cgroup: IoCgroup | None = None) -> None:
        self.install = install  # PostgreSQL's programs come from this install
        # Tools are born in this cgroup: the storage probes see the volume's I/O limits.
        self.cgroup = cgroup

    def run(
        self,
        invocation: Invocation,
        work_dir: Path,
        *,
        cancel: CancelToken = NEVER,
        on_line: LineHandler | None = None,
        on_start: StartHandler | None = None,
    ) -> ToolResult:
        spawn = self.cgroup.spawn if self.cgroup is not None else None
        return run_process(
            invocation, work_dir, cancel=cancel, on_line=on_line, on_start=on_start, spawn=spawn
        )

    def program(self, name: str) -> str | None:
        if self.install is not None:
            found = self.install.program(name)
            if found is not None:
                return str(found)
            if name.startswith(("pg", "initdb", "postgres")):
                return None  # PostgreSQL's programs: only from the chosen install
        return shutil.which(name)

    def cores(self) -> int:
        return os.cpu_count() or 1

    def server_memory(self, cap_bytes: int | None) -> MemoryBasis | str:
        basis = memory_basis(cap_bytes)
        return basis or "cannot tell how much memory this machine has (/proc/meminfo)"

    def role_devices(self, paths: Mapping[str, Path]) -> list[RoleDevice]:
        return resolve_roles(dict(paths))

    def device_sectors_read(self, device: str) -> int | None:
        counters = parse_diskstats(self.read_proc("diskstats")["diskstats"]).get(device)
        return counters.sectors_read if counters else None

    def read_proc(self, *names: str) -> dict[str, str]:
        return {name: (PROC / name).read_text() for name in names}

    def proc_source(self, name: str) -> str:
        return str(PROC / name)

    def drop_caches(self) -> str | None:
        os.sync()
        try:
            DROP_CACHES.write_text("1")
        except OSError as exc:
            return f"cannot write {DROP_CACHES}: {exc.strerror or exc} (needs root)"
        return None

    def free_bytes(self, directory: Path) -> int | None:
        st = os.statvfs(directory)
        if st.f_blocks == 0:
            return None
        return st.f_bavail * st.f_frsize

    def fstype(self, path: Path) -> str | None:
        fstype = describe_path(path).get("fstype")
        return str(fstype) if fstype else None

    def direct_io_refused(self, directory: Path) -> bool:
        """Open a file with O_DIRECT and write one aligned block: some filesystems accept
        the open and refuse the write."""
        path = directory / _DIRECT_PROBE_FILE
        fd = -1
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_DIRECT, 0o600)
            with mmap.mmap(-1, _DIRECT_BLOCK) as block:  # page-aligned, as O_DIRECT needs
                os.write(fd, block)
        except OSError as exc:
            return exc.errno == errno.EINVAL  # other errors are the tool's to report
        finally:
            if fd >= 0:
                os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # the open may create the file even when it refuses O_DIRECT
        return False

    def same_filesystem(self, a: Path, b: Path) -> bool:
        return _same_filesystem(a, b)

    def remove_file(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


class ClientHost(LocalHost):
    """Tools here, the server elsewhere: its machine's memory, disks and caches are out of
    sight, and the host says so instead of answering with this machine's."""

    name = "client"

    def server_memory(self, cap_bytes: int | None) -> MemoryBasis | str:
        return (
            "the memory of a server reached by URI is not visible from here; "
            "give --dataset SIZE (e.g. --dataset 20GiB) to size the data for it"
        )

    def role_devices(self, paths: Mapping[str, Path]) -> list[RoleDevice]:
        return []

    def proc_source(self, name: str) -> str:
        return f"{PROC / name} of this machine (the client's: the server's is not visible)"

    def drop_caches(self) -> str | None:
        return "the page cache of a server reached by URI cannot be dropped from here"
