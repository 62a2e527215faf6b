"""analysis/memory_storage.py: which targets measured memory rather than storage, from the
`device` records runs store (the real runs are tests/integration/test_tmpfs_target.py)."""

from __future__ import annotations

from howfast.analysis.memory_storage import memory_storage_warning
from howfast.model import JSONValue, TargetRecord


def target(data: str | None, wal: str | None) -> TargetRecord:
    device: dict[str, JSONValue] = {}
    for role, fstype, mount in (("data", data, "/srv"), ("wal", wal, "/dev/shm")):
        if fstype is not None:
            device[role] = {"fstype": fstype, "mount_point": mount, "path": f"{mount}/x"}
    return TargetRecord(name="/srv/bench", kind="local", device=device, location="/srv/bench")


def test_only_memory_filesystems_are_warned_about_and_each_role_is_named() -> None:
    assert memory_storage_warning(target("ext4", "ext4")) is None
    assert memory_storage_warning(target(None, None)) is None  # a server's disks: not seen
    both = memory_storage_warning(target("tmpfs", "tmpfs"))
    assert both is not None and both.startswith("/srv/bench is on tmpfs, which lives in memory")
    wal = memory_storage_warning(target("xfs", "tmpfs"))
    assert wal is not None and wal.startswith("the WAL of /srv/bench is on tmpfs (/dev/shm)")
    data = memory_storage_warning(target("ramfs", "ext4"))
    assert data is not None and data.startswith("the data of /srv/bench is on ramfs (/srv)")
    alone = memory_storage_warning(target("tmpfs", None))  # a record without its WAL role
    assert alone is not None and alone.startswith("/srv/bench is on tmpfs")
