"""A throwaway PostgreSQL whose postmaster the test holds by its PID, so that the test itself
can restart it (fast shutdown, then start) or crash it (SIGKILL, crash recovery) while a load
runs. Written here independently of howfast's targets: the tests of the surviving load must
not lean on the code that will apply events.

Runs as the `postgres` OS user (howfast never runs PostgreSQL as root), listens on a Unix
socket in its own directory only (no TCP), fsync on. Everything is stopped by PID and removed
by `close()`.

    python -m tests.pgprocess  # starts one, prints its socket, waits for Enter, removes it
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def bindir() -> Path | None:
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    return next((d for d in reversed(candidates) if (d / "postgres").exists()), None)


def children(pid: int) -> list[int]:
    """The PIDs whose parent is `pid` (zombies too)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    """`pid` runs: it exists and is no zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


class Postmaster:
    """initdb'd on creation; `start()` before use."""

    def __init__(self, *, port: int = 5432, settings: dict[str, str] | None = None) -> None:
        found = bindir()
        if found is None:
            raise RuntimeError("no PostgreSQL server binaries (apt-get install postgresql)")
        self.bin = found
        self.user = pwd.getpwnam("postgres")
        self.base = Path(tempfile.mkdtemp(prefix="howfast-pgprocess-", dir="/var/tmp"))
        self.base.chmod(0o755)
        os.chown(self.base, self.user.pw_uid, self.user.pw_gid)
        self.data = self.base / "data"
        self.socket_dir = self.base
        self.log = self.base / "server.log"
        self.port = port
        self.settings = {"shared_buffers": "64MB", **(settings or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.pids: list[int] = []  # every postmaster started, for close()
        self._as_postgres(
            [str(self.bin / "initdb"), "-D", str(self.data), "-U", "howfast", "--auth=trust",
             "-E", "UTF8", "--no-sync"],
        )  # fmt: skip

    def _as_postgres(self, argv: list[str]) -> None:
        subprocess.run(
            argv, check=True, capture_output=True, user=self.user.pw_uid, group=self.user.pw_gid
        )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def conninfo_args(self) -> list[str]:
        return ["-h", str(self.socket_dir), "-p", str(self.port), "-U", "howfast", "postgres"]

    def start(self, timeout_s: float = 60) -> None:
        """Start the postmaster (its PID is the child's: no wrapper) and wait until it answers."""
        argv = [str(self.bin / "postgres"), "-D", str(self.data), "-c", "listen_addresses="]
        argv += ["-c", f"unix_socket_directories={self.socket_dir}", "-c", f"port={self.port}"]
        for name, value in self.settings.items():
            argv += ["-c", f"{name}={value}"]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=log, user=self.user.pw_uid, group=self.user.pw_gid,
                start_new_session=True,
            )  # fmt: skip
        self.pids.append(self.proc.pid)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ready = subprocess.run(
                [str(self.bin / "pg_isready"), "-q", "-h", str(self.socket_dir), "-p",
                 str(self.port)], check=False,
            )  # fmt: skip
            if ready.returncode == 0:
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited:\n{self.log.read_text()[-2000:]}")
            time.sleep(0.05)
        raise RuntimeError("postgres did not answer in time")

    def restart(self) -> float:
        """Fast shutdown (SIGINT to the postmaster), wait, start: seconds it took."""
        began = time.monotonic()
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        self.start()
        return time.monotonic() - began

    def crash(self) -> float:
        """SIGKILL of the postmaster; its children exit by themselves when they notice (SIGKILL
        after 10 s); start again: crash recovery. Seconds it took."""
        began = time.monotonic()
        assert self.proc is not None
        kids = children(self.proc.pid)
        self.proc.kill()
        self.proc.wait(timeout=60)
        deadline = time.monotonic() + 10
        while any(alive(c) for c in kids):
            if time.monotonic() > deadline:
                for child in kids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(child, signal.SIGKILL)
            time.sleep(0.02)
        self.start()
        return time.monotonic() - began

    def psql(self, sql: str) -> str:
        out = subprocess.run(
            [str(self.bin / "psql"), "-X", "-A", "-t", *self.conninfo_args(), "-c", sql],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        return out.stdout.strip()

    def close(self) -> None:
        """Stop the server by its PID (immediate shutdown), wait for its processes, remove it."""
        if self.proc is not None and self.proc.poll() is None:
            kids = children(self.proc.pid)
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            deadline = time.monotonic() + 10
            while any(alive(c) for c in kids) and time.monotonic() < deadline:
                time.sleep(0.05)
        shutil.rmtree(self.base, ignore_errors=True)


@contextlib.contextmanager
def postmaster(port: int = 5432, settings: dict[str, str] | None = None) -> Iterator[Postmaster]:
    server = Postmaster(port=port, settings=settings)
    try:
        server.start()
        yield server
    finally:
        server.close()


if __name__ == "__main__":
    with postmaster(port=5999) as server:
        print(f"{server.socket_dir} port {server.port}; Enter stops and removes it")
        input()
