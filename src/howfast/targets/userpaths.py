"""The directories a user names (--target, --wal-dir, probe DIR), checked together before
anything runs: each must be a place of its own, outside what howfast itself created.

- Inside a `howfast-*` directory that howfast made (a cluster, a probe's files, an emulated
  volume, a fleet's instances, a run directory), live or kept: the run that made it removes
  it at its end (or the user does, once done with a kept cluster), under the second run.
- The same directory twice (`D` and `D/`, or through a symlink): the second target would
  find the first's cluster and measure nothing new; one directory inside another is the
  same storage measured twice, and the outer's cleanup goes through the inner.
- --wal-dir equal to a target, inside it or around it: WAL would not be apart from the data.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from pathlib import Path

from howfast.errors import UsageError
from howfast.redact import redact_dsn
from howfast.store.liveness import pid_exists
from howfast.targets.claim import MARKER
from howfast.targets.dirlock import INFO as LOCK_INFO
from howfast.targets.dirlock import holder_text, read_info

# howfast-<token>: a cluster or a probe's files; -vol- an emulated volume, -fleet- a fleet's
# instances. Each is made in a directory that carries howfast's marker.
_OWNED = re.compile(r"howfast-(?:vol-|fleet-)?[0-9a-f]{8}")
# A run's private directory (socket, server log), made by mkdtemp on tmpfs or /tmp.
_RUN_DIR = re.compile(r"howfast-(?:run|vol)-[0-9a-f]{8}-.+")


def created_by_howfast(path: Path) -> bool:
    """Whether `path` is a directory howfast made (by its name and where it is)."""
    if _RUN_DIR.fullmatch(path.name):
        return True
    return _OWNED.fullmatch(path.name) is not None and (path.parent / MARKER).exists()


def howfast_directory_around(path: Path) -> Path | None:
    """The directory howfast made that `path` (resolved) is, or is inside, if any."""
    for candidate in (path, *path.parents):
        if created_by_howfast(candidate):
            return candidate
    return None


def _whose(owned: Path) -> str:
    """Who is using a directory howfast made: the run holding its parent's lock, or none."""
    doc = read_info(owned.parent / LOCK_INFO)
    pid = doc.get("pid")
    if isinstance(pid, int) and pid_exists(pid):
        return f"{holder_text(doc)} is using it and removes it when it ends"
    return "it was kept by an earlier run (--keep) or left by one that was killed"


def refuse_inside_howfast(given: str, resolved: Path, role: str) -> None:
    owned = howfast_directory_around(resolved)
    if owned is None:
        return
    inside = "is" if owned == resolved else "is inside"
    raise UsageError(
        f"{role} {given} {inside} {owned}, a directory howfast created: {_whose(owned)}",
        "give a directory of its own, outside every howfast-* directory",
    )


def _resolved(text: str | Path) -> Path:
    """The path with `~`, `..` and symlinks resolved (as far as it exists)."""
    with contextlib.suppress(OSError, RuntimeError):
        return Path(text).expanduser().resolve()
    return Path(text).expanduser().absolute()


def _within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def check_run_targets(targets: Sequence[str], wal_dir: Path | None) -> None:
    """`howfast run`'s --target list and --wal-dir: directory targets as above; any other
    target (a server URI, a StorageClass) given twice is refused too."""
    from howfast.targets.kinds.directory import split_directory
    from howfast.targets.registry import kind_for

    directories = [t for t in targets if kind_for(t).name == "local"]
    others = [t for t in targets if t not in directories]
    # `DIR` and `DIR?replicas=1`: two designs on the same storage, measured one after the
    # other, checked once; the same directory with the same design twice (`D` and `D/`, a
    # link to it) is still refused.
    checked: list[str] = []
    seen: list[tuple[Path, object]] = []
    for text in directories:
        path, design = split_directory(text)
        resolved = _resolved(path)
        if any(other == resolved and asked != design for other, asked in seen):
            continue
        seen.append((resolved, design))
        checked.append(path)
    for index, text in enumerate(others):
        if text in others[:index]:
            raise UsageError(
                f"--target {redact_dsn(text)} is given twice: each target is measured once per run",
                "give it once; --repeat N measures each step N times",
            )
    check_user_directories(checked, wal_dir)


def check_user_directories(
    targets: Sequence[str], wal_dir: Path | None = None, *, role: str = "target directory"
) -> None:
    """UsageError, before anything runs, for directory targets (and --wal-dir) that cannot be
    measured as given (the module's docstring says which)."""
    seen: list[tuple[str, Path]] = []
    for text in targets:
        resolved = _resolved(text)
        refuse_inside_howfast(text, resolved, role)
        for earlier, other in seen:
            if resolved == other:
                shown = f" ({resolved})" if str(resolved) not in (text, earlier) else ""
                raise UsageError(
                    f"{role} {text} is {earlier} again{shown}: each target is measured "
                    "once per run",
                    "give each directory once; --repeat N measures each step N times",
                )
            if _within(resolved, other) or _within(other, resolved):
                inner, outer = (text, earlier) if _within(resolved, other) else (earlier, text)
                raise UsageError(
                    f"{role} {inner} is inside {role} {outer}: the same storage twice, and "
                    "the outer run's files would sit around the inner's",
                    "give directories side by side, not one inside the other",
                )
        seen.append((text, resolved))
    if wal_dir is None:
        return
    wal = _resolved(wal_dir)
    refuse_inside_howfast(str(wal_dir), wal, "WAL directory")
    for text, resolved in seen:
        if wal == resolved:
            raise UsageError(
                f"--wal-dir {wal_dir} is the {role} {text} itself: WAL would stay with the data",
                "give --wal-dir a directory on the other storage, or drop --wal-dir to keep "
                "WAL with the data",
            )
        if _within(wal, resolved) or _within(resolved, wal):
            where = "inside" if _within(wal, resolved) else "around"
            raise UsageError(
                f"--wal-dir {wal_dir} is {where} the {role} {text}: WAL and data would share "
                "one directory tree (and storage)",
                "give --wal-dir a directory apart from the target, on the other storage",
            )
