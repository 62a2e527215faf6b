"""Helpers for PostgreSQL servers howfast runs on this machine (the primary of a local target,
its standbys): a free loopback port, a postgresql.conf line, the processes working in a data
directory, where a private run directory goes."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

from howfast.machine.fsinfo import same_filesystem


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def conf_line(name: str, value: str) -> str:
    """One postgresql.conf line; the value quoted the way the server reads it."""
    return f"{name} = '{value.replace(chr(92), chr(92) * 2).replace(chr(39), chr(39) * 2)}'\n"


def processes_in(directory: Path) -> list[int]:
    """PIDs whose working directory is `directory` (PostgreSQL processes chdir to PGDATA)."""
    pids = []
    target = str(directory)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd == target or cwd.startswith(target + "/") or cwd == target + " (deleted)":
            pids.append(int(entry.name))
    return pids


def runtime_base(avoid: list[Path]) -> Path:
    """Where the private run directory goes: /dev/shm when it is a separate filesystem from
    the storage under test, else the system temp dir when that is separate, else /dev/shm
    or temp anyway (the caller warns)."""
    for candidate in (Path("/dev/shm"), Path(tempfile.gettempdir())):
        usable = candidate.is_dir() and os.access(candidate, os.W_OK | os.X_OK)
        if usable and not any(same_filesystem(candidate, p) for p in avoid):
            return candidate
    return Path(tempfile.gettempdir())
