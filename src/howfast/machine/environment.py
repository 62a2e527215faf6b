"""The machine a run happened on, captured once per run."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

from howfast import __version__
from howfast.model import JSONValue


def _cpu_model(cpuinfo: str) -> str | None:
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model"):
            return value.strip()
    return None


def _mem_total_bytes(meminfo: str) -> int | None:
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def _os_name(os_release: str) -> str | None:
    for line in os_release.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def capture() -> dict[str, JSONValue]:
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "os": _os_name(_read("/etc/os-release")),
        "cpu_model": _cpu_model(_read("/proc/cpuinfo")),
        "cpu_count": os.cpu_count() or 1,
        "memory_bytes": _mem_total_bytes(_read("/proc/meminfo")),
        "python": platform.python_version(),
        "howfast_version": __version__,
    }
