"""Helpers for PostgreSQL servers howfast runs on this machine (the primary of a local target,
its standbys): a free loopback port, a postgresql.conf line, the processes working in a data
directory, where a private run directory goes."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import tempfile
from collections.abc import Iterable
from pathlib import Path

from howfast.errors import HowfastError
from howfast.machine.fsinfo import same_filesystem

PORT_TRIES = 50


def free_port(addresses: Iterable[str] = ()) -> int:
    """A TCP port free on 127.0.0.1 and on each of `addresses` (IPv4, the ones the server will
    listen on: listen_ips()). Free on 127.0.0.1 is not free on 127.0.0.2: a standby listening
    there failed with "Address already in use" beside the test lab, whose second node's
    components hold ports on 127.0.0.2. The server binds the port later: another process may
    still take it in between."""
    others = [a for a in dict.fromkeys(addresses) if a != "127.0.0.1"]
    for _ in range(PORT_TRIES):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
            if port_free_on(port, others):
                return port
    raise HowfastError(f"no TCP port is free on 127.0.0.1 and {', '.join(others)} at once")


def port_free_on(port: int, addresses: Iterable[str]) -> bool:
    """Whether `port` can be bound on every one of `addresses` now."""
    with contextlib.ExitStack() as held:
        for address in addresses:
            sock = held.enter_context(socket.socket())
            try:
                sock.bind((address, port))
            except OSError:
                return False
    return True


def listen_ips(listen_addresses: str) -> list[str]:
    """The IPv4 addresses of a listen_addresses setting ('*': every one, 0.0.0.0); names
    and IPv6 addresses are left to the server."""
    found = []
    for item in (a.strip() for a in listen_addresses.split(",")):
        if item == "*":
            found.append("0.0.0.0")
            continue
        with contextlib.suppress(ValueError):
            found.append(str(ipaddress.IPv4Address(item)))
    return found


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
