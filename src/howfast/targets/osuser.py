"""The unprivileged OS user PostgreSQL runs as when howfast itself runs as root."""

from __future__ import annotations

import os
import pwd
import subprocess
from dataclasses import dataclass
from pathlib import Path

from howfast.errors import HowfastError, UsageError

CANDIDATE_USERS = ("postgres", "howfast")


@dataclass(frozen=True)
class OsUser:
    name: str
    uid: int
    gid: int

    def subprocess_kwargs(self) -> dict[str, int]:
        """Arguments for subprocess to run a program as this user (empty when it is us)."""
        if self.uid == os.geteuid():
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}  # type: ignore[dict-item]


def current_user() -> OsUser:
    entry = pwd.getpwuid(os.geteuid())
    return OsUser(entry.pw_name, entry.pw_uid, entry.pw_gid)


def server_user() -> OsUser:
    """Who runs PostgreSQL: ourselves, or when root an existing unprivileged user, created
    (as a system user without login) when none exists."""
    if os.geteuid() != 0:
        return current_user()
    for name in CANDIDATE_USERS:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if entry.pw_uid != 0:
            return OsUser(entry.pw_name, entry.pw_uid, entry.pw_gid)
    try:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "howfast"],
            check=True,
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        raise HowfastError(
            "running as root and no unprivileged user exists for PostgreSQL; "
            f"creating user 'howfast' failed: {exc}",
            "create one with: useradd --system howfast",
        ) from exc
    entry = pwd.getpwnam("howfast")
    return OsUser(entry.pw_name, entry.pw_uid, entry.pw_gid)


def _can(user: OsUser, st: os.stat_result, bit_user: int, bit_group: int, bit_other: int) -> bool:
    if st.st_uid == user.uid:
        return bool(st.st_mode & bit_user)
    groups = os.getgrouplist(user.name, user.gid)
    if st.st_gid in groups:
        return bool(st.st_mode & bit_group)
    return bool(st.st_mode & bit_other)


def check_reachable(user: OsUser, path: Path) -> None:
    """Refuse early when `user` cannot reach `path` (a parent without search permission):
    PostgreSQL would fail later with a less helpful message."""
    if user.uid == 0 or user.uid == os.geteuid():
        return
    path = path.resolve()
    for parent in [*reversed(path.parents), path]:
        st = parent.stat()
        if not _can(user, st, 0o100, 0o010, 0o001):
            raise UsageError(
                f"{path}: PostgreSQL runs as the unprivileged user '{user.name}', who cannot "
                f"enter {parent} (mode {st.st_mode & 0o777:o}, owner uid {st.st_uid})",
                f"choose a directory '{user.name}' can reach, or grant search permission "
                f"on {parent} (chmod o+x)",
            )
