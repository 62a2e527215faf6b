"""The names howfast gives what it creates, and what each name says (pure).

In a target directory: `howfast-TOKEN` (a cluster, or a probe's files), `howfast-vol-TOKEN`
(an emulated volume: its image and mount point), `howfast-fleet-TOKEN` (a fleet's instance
directories). In /dev/shm or the temp directory (a random tempfile suffix after the name):
`howfast-run-TOKEN-` (a cluster's socket and server log), `howfast-vol-TOKEN-` (the volume's
nbdkit socket, pid files and FUSE mount point), `howfast-work-PID-` (the steps' files),
`howfast-settings-` (a settings check). Cgroups: `howfast-[KIND-]TOKEN`. TOKEN is 8 hex digits.
"""

from __future__ import annotations

import re
from pathlib import PurePath

TOKEN = "[0-9a-f]{8}"
SUFFIX = "[a-z0-9_]{8}"  # tempfile.mkdtemp's
CLUSTER = re.compile(rf"howfast-({TOKEN})")
VOLUME = re.compile(rf"howfast-vol-({TOKEN})")
FLEET = re.compile(rf"howfast-fleet-({TOKEN})")
RUN_DIR = re.compile(rf"howfast-run-({TOKEN})-{SUFFIX}")
VOLUME_RUN_DIR = re.compile(rf"howfast-vol-({TOKEN})-{SUFFIX}")
WORK_DIR = re.compile(rf"howfast-work-([0-9]+)-{SUFFIX}")
SETTINGS_DIR = re.compile(rf"howfast-settings-{SUFFIX}")
CGROUP = re.compile(rf"howfast-(?:([a-z]+)-)?({TOKEN})")
CGROUP_LOCK = re.compile(rf"howfast-cgroup-(howfast-(?:[a-z]+-)?{TOKEN})\.lock")


def target_entry_kind(name: str) -> str | None:
    """'cluster', 'volume' or 'fleet' for a howfast directory inside a target directory."""
    for kind, pattern in (("cluster", CLUSTER), ("volume", VOLUME), ("fleet", FLEET)):
        if pattern.fullmatch(name):
            return kind
    return None


def private_kind(name: str) -> str | None:
    """'run', 'volume', 'work' or 'settings' for a private directory's name."""
    for kind, pattern in (
        ("run", RUN_DIR),
        ("volume", VOLUME_RUN_DIR),
        ("work", WORK_DIR),
        ("settings", SETTINGS_DIR),
    ):
        if pattern.fullmatch(name):
            return kind
    return None


def private_token(name: str) -> str | None:
    for pattern in (RUN_DIR, VOLUME_RUN_DIR):
        found = pattern.fullmatch(name)
        if found:
            return found[1]
    return None


def work_dir_pid(name: str) -> int | None:
    found = WORK_DIR.fullmatch(name)
    return int(found[1]) if found else None


def cgroup_token(name: str) -> str | None:
    found = CGROUP.fullmatch(name)
    return found[2] if found else None


def cgroup_of_lock(name: str) -> str | None:
    found = CGROUP_LOCK.fullmatch(name)
    return found[1] if found else None


def _directory_of(path: str, pattern: re.Pattern[str]) -> tuple[str, str] | None:
    """The innermost directory of `path` whose name matches `pattern`, with its token."""
    parts = PurePath(path).parts
    for i in range(len(parts) - 1, 0, -1):
        found = pattern.fullmatch(parts[i])
        if found:
            return str(PurePath(*parts[: i + 1])), found[1]
    return None


def cluster_of(path: str) -> tuple[str, str] | None:
    """For a path inside a cluster directory (a server's working directory,
    `<dir>/howfast-TOKEN/data`): (the cluster directory, TOKEN)."""
    return _directory_of(path, CLUSTER)


def volume_of(path: str) -> tuple[str, str] | None:
    """For a path inside an emulated volume's workspace (`<dir>/howfast-vol-TOKEN/...`):
    (the workspace, TOKEN)."""
    return _directory_of(path, VOLUME)


def volume_run_dir_of(path: str) -> tuple[str, str] | None:
    """For a path inside a volume's private directory (`/dev/shm/howfast-vol-TOKEN-xxxx/...`,
    e.g. a loop device's backing file): (that directory, TOKEN)."""
    return _directory_of(path, VOLUME_RUN_DIR)


def is_within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")
