"""Helpers for PostgreSQL servers howfast runs on this machine (the primary of a local target,
its standbys): a free loopback port, a postgresql.conf line, the processes working in a data
directory."""

from __future__ import annotations

import os
import socket
from pathlib import Path


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
