"""Fixtures for tests that run the real howfast command against real PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import shared_tmpdir

TINY_PLAN = """
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
duration = "2s"
"""


@dataclass
class Howfast:
    store: Path
    workdir: Path

    def env(self) -> dict[str, str]:
        return {**os.environ, "HOWFAST_STORE": str(self.store), "PYTHONUNBUFFERED": "1"}

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "howfast", *args]

    def __call__(
        self, *args: str, input: str | None = None, timeout: float = 240
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args),
            env=self.env(),
            capture_output=True,
            text=True,
            input=input,
            timeout=timeout,
            cwd=self.workdir,
        )

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args),
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.workdir,
        )

    def in_private_shm(self, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
        """Run howfast with a /dev/shm of its own (tests/integration/private_shm.py); returns
        what it left there. Root only."""
        result = self.workdir / "shm-left.json"
        wrapper = str(Path(__file__).with_name("private_shm.py"))
        argv = ["unshare", "--mount", "--propagation", "private", sys.executable, wrapper,
                str(result), "--", *self.argv(*args)]  # fmt: skip
        out = subprocess.run(argv, env=self.env(), capture_output=True, text=True, timeout=240,
                             cwd=self.workdir)  # fmt: skip
        left = json.loads(result.read_text()) if result.exists() else ["(the wrapper failed)"]
        return out, left

    def plan(self, text: str, name: str = "tiny.toml") -> Path:
        path = self.workdir / name
        path.write_text(text)
        return path


@pytest.fixture
def howfast(tmp_path: Path) -> Howfast:
    return Howfast(store=tmp_path / "results.db", workdir=tmp_path)


@pytest.fixture
def target_dir() -> Iterator[Path]:
    """An empty directory the unprivileged PostgreSQL user can reach."""
    base = shared_tmpdir("howfast-target-")
    target = base / "bench"
    target.mkdir()
    target.chmod(0o755)
    try:
        yield target
    finally:
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
