"""Which block device serves each storage role (data, WAL) of a target.

A partition is sampled as its whole disk (the queue, and so waits and utilisation, belong to
the disk); a loop device as itself, since its counters are exactly what the filesystem on it
asked for, while the device behind its backing file mixes in everything else on that disk
(the backing device is recorded alongside). Roles on the same device are sampled once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from howfast.model import JSONValue
from howfast.targets.fsinfo import block_device, describe_path


@dataclass(frozen=True)
class RoleDevice:
    role: str
    path: str
    device: str | None  # as /proc/diskstats names it; None: no block device (tmpfs...)
    shares_with: str | None = None  # the earlier role already sampling this device
    fstype: str | None = None
    backing_device: str | None = None  # for a loop device: the disk under its backing file

    def describe(self) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {"path": self.path, "device": self.device}
        if self.fstype:
            out["fstype"] = self.fstype
        if self.backing_device:
            out["backing_device"] = self.backing_device
        if self.shares_with:
            out["same_device_as"] = self.shares_with
        if self.device is None:
            out["note"] = f"no block device behind this path ({self.fstype or 'unknown'})"
        return out


def disk_of(info: dict[str, JSONValue]) -> tuple[str | None, str | None]:
    """(disk to sample, backing disk of a loop device) from describe_path's record."""
    device = info.get("device")
    if not isinstance(device, dict) or not device.get("name"):
        return None, None
    backing = device.get("backing_device")
    backing_disk = backing.get("disk") if isinstance(backing, dict) else None
    return str(device.get("disk") or device["name"]), str(backing_disk) if backing_disk else None


def assign(roles: list[tuple[str, str, str | None, str | None, str | None]]) -> list[RoleDevice]:
    """(role, path, device, fstype, backing) in role order -> RoleDevices, the later of two
    roles on one device marked as sharing the earlier one's samples."""
    first_role: dict[str, str] = {}
    out = []
    for role, path, device, fstype, backing in roles:
        shares = first_role.get(device) if device else None
        if device and shares is None:
            first_role[device] = role
        out.append(RoleDevice(role, path, device, shares, fstype, backing))
    return out


def resolve_roles(paths: dict[str, Path]) -> list[RoleDevice]:
    rows = []
    for role, path in paths.items():
        info = describe_path(path)
        device, backing = disk_of(info)
        if device is None:
            device, backing = _from_mount_source(info)
        fstype = info.get("fstype")
        rows.append((role, str(path), device, str(fstype) if fstype else None, backing))
    return assign(rows)


def _from_mount_source(info: dict[str, JSONValue]) -> tuple[str | None, str | None]:
    """Filesystems such as btrfs report an anonymous device number; their mount source
    (/dev/nvme0n1p2) still names the block device."""
    source = info.get("source")
    if not isinstance(source, str) or not source.startswith("/dev/"):
        return None, None
    try:
        rdev = os.stat(source).st_rdev
    except OSError:
        return None, None
    return disk_of({"device": block_device(f"{os.major(rdev)}:{os.minor(rdev)}")})
