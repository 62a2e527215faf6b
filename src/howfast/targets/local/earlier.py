"""What earlier runs left in a directory a local target is about to use."""

from __future__ import annotations

import os
from pathlib import Path

from howfast.errors import UsageError
from howfast.targets.leftovers.marks import KEPT
from howfast.targets.local_server import processes_in


def check_earlier_clusters(directory: Path, role: str) -> list[str]:
    """Refuse a directory where a server of an earlier howfast cluster still runs: left by a
    howfast that was killed (SIGKILL cannot be caught), or a --keep cluster started again. It
    would compete for the storage under test; howfast does not stop what it did not start.
    Returns a warning for each stopped one (it takes space), saying how to remove it: the
    caller holds the directory's lock, so nothing here belongs to a live run."""
    cleanup = f"howfast cleanup --target {directory}"
    warnings = []
    for cluster in sorted(p for p in directory.glob("howfast-*") if p.is_dir()):
        pids = processes_in(cluster)
        if pids:
            data_dir = _working_dir(min(pids)) or cluster / "data"
            raise UsageError(
                f"{role} {directory} holds {cluster.name} from an earlier run whose howfast "
                "is gone, and its server is still running (PIDs "
                f"{', '.join(map(str, sorted(pids)))}); it would compete for the storage under "
                "test",
                f"`{cleanup}` lists what that run left, and with --yes stops its server and "
                f"removes the rest; or stop it by hand, `pg_ctl -D {data_dir} stop -m fast` as "
                "its OS user",
            )
        if (cluster / KEPT).exists() or (cluster / "server.log").is_file():
            how = "kept with --keep; it is left alone: remove it when you no longer need it"
        elif cluster.name.startswith("howfast-vol-"):
            how = (
                "an emulated volume left by a howfast that was killed (its image, and maybe a "
                f"mount and a loop device, stay until removed): `{cleanup} --yes` removes it"
            )
        else:
            how = f"left by a howfast that was killed: `{cleanup} --yes` removes it"
        warnings.append(f"{role} {directory} holds {cluster.name} from an earlier run, {how}")
    return warnings


def _working_dir(pid: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd").removesuffix(" (deleted)"))
    except OSError:
        return None
