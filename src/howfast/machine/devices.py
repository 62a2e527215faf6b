"""Which block device serves each storage role (data, WAL) of a target.

A partition is sampled as its whole disk (the queue, and so waits and utilisation, belong to
the disk); a loop device as itself, since its counters are exactly what the filesystem on it
asked for, while the device behind its backing file mixes in everything else on that disk
(the backing device is recorded alongside). Roles on the same device are sampled once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from howfast.machine.fsinfo import block_device, describe_path, mount_for, parse_mountinfo
from howfast.model import JSONValue


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


@dataclass(frozen=True)
class BlockLink:
    """/sys/dev/block/MAJ:MIN as a container sees it."""

    target: str  # where the link points: ../../devices/.../block/vda/vda1
    partition: bool

    @property
    def name(self) -> str:
        return PurePosixPath(self.target).name

    @property
    def disk(self) -> str:
        """The whole disk: a partition's parent directory in sysfs is its disk (also for
        NVMe, whose disks are not under a `block` directory)."""
        path = PurePosixPath(self.target)
        return path.parent.name if self.partition else path.name


def parse_block_links(text: str) -> dict[str, BlockLink]:
    """machine/podread.BLOCK_LINKS_SCRIPT's output -> MAJ:MIN -> BlockLink."""
    out: dict[str, BlockLink] = {}
    for line in text.splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) == 3 and ":" in parts[0] and parts[2]:
            out[parts[0]] = BlockLink(parts[2], parts[1] == "1")
    return out


def diskstats_numbers(text: str) -> dict[str, str]:
    """/proc/diskstats -> MAJ:MIN -> device name (the first three fields of each line)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit():
            out[f"{parts[0]}:{parts[1]}"] = parts[2]
    return out


def roles_from_mounts(
    paths: Mapping[str, str],
    mountinfo: str,
    diskstats: str,
    links: Mapping[str, BlockLink],
) -> list[RoleDevice]:
    """The devices behind each role's path as a container sees them, where the disks are
    not this machine's (a pod): the mount holding the path (its mountinfo line gives
    MAJ:MIN), the name /proc/diskstats gives that number, and the whole disk of a partition
    from /sys/dev/block (as resolve_roles does here). A filesystem with an anonymous number
    (major 0: tmpfs, overlay; btrfs) has no device, unless its mount source names one that
    /proc/diskstats knows."""
    entries = parse_mountinfo(mountinfo)
    names = diskstats_numbers(diskstats)
    numbers = {name: num for num, name in names.items()}
    rows: list[tuple[str, str, str | None, str | None, str | None]] = []
    for role, path in paths.items():
        mount = mount_for(Path(path), entries)
        if mount is None:
            rows.append((role, path, None, None, None))
            continue
        number: str | None = mount.device
        name = names.get(mount.device)
        if name is None and mount.source.startswith("/dev/"):
            name = PurePosixPath(mount.source).name
            number = numbers.get(name)
            name = name if number else None
        link = links.get(number) if number else None
        disk = link.disk if link is not None and name is not None else name
        rows.append((role, path, disk, mount.fstype, None))
    return assign(rows)
