"""Storage that lives in memory (tmpfs, ramfs): no figure measured on it is a disk's. Pure:
from a target's recorded `device`, the warning its steps carry (derived when a run is read)
and that a run prints as the target starts."""

from __future__ import annotations

from collections.abc import Mapping

from howfast.model import JSONValue, TargetRecord

# Filesystems that keep files in RAM: even where the kernel accepts O_DIRECT on them (tmpfs
# since Linux 6.6), every read and write is a memory copy and a flush costs nothing.
MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})
MARK = "lives in memory"  # in every such warning, the fio probes' own included


def _in_memory(role: JSONValue) -> tuple[str, str] | None:
    """(fstype, mount point) of a role's record when that filesystem is in memory."""
    if not isinstance(role, Mapping):
        return None
    fstype = role.get("fstype")
    if not isinstance(fstype, str) or fstype not in MEMORY_FILESYSTEMS:
        return None
    return fstype, str(role.get("mount_point") or role.get("path") or "")


def memory_storage_warning(target: TargetRecord) -> str | None:
    """What a target whose data or WAL is on tmpfs measures: memory, not storage."""
    where = target.location or target.name
    data = _in_memory(target.device.get("data"))
    wal = _in_memory(target.device.get("wal"))
    if data and (wal or "wal" not in target.device):
        return (
            f"{where} is on {data[0]}, which {MARK}: nothing reaches a disk and flushes cost "
            "nothing, so these figures are the RAM's, not a storage's"
        )
    if wal:
        return (
            f"the WAL of {where} is on {wal[0]} ({wal[1]}), which {MARK}: a commit waits for "
            "no flush, so these figures are not those of a durable storage"
        )
    if data:
        return (
            f"the data of {where} is on {data[0]} ({data[1]}), which {MARK}: the tables are "
            "read and written without any disk I/O; only the WAL is on storage"
        )
    return None
