"""What storage is behind a path: filesystem, mount options, block device and its queue.

Parsers of /proc/self/mountinfo and sysfs values are pure; `describe_path` reads the files.
Partitions resolve to their disk, loop devices to the device behind their backing file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from howfast.model import JSONValue

SYS = Path("/sys")


@dataclass(frozen=True)
class MountEntry:
    mount_point: str
    device: str  # "major:minor"
    fstype: str
    source: str
    options: str  # per-mount and superblock options joined


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo
    return field.encode().decode("unicode_escape") if "\\" in field else field


def parse_mountinfo(text: str) -> list[MountEntry]:
    entries = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        lf, rf = left.split(), right.split()
        if len(lf) < 6 or len(rf) < 2:
            continue
        options = lf[5] + ("," + rf[2] if len(rf) > 2 else "")
        entries.append(MountEntry(_unescape(lf[4]), lf[2], rf[0], _unescape(rf[1]), options))
    return entries


def mount_for(
    path: Path, entries: list[MountEntry], st_dev: str | None = None
) -> MountEntry | None:
    """The mount holding `path`: the longest mount point that is a prefix; among stacked
    mounts on the same point, the last one (it hides the others)."""
    best: MountEntry | None = None
    target = str(path)
    for entry in entries:
        mp = entry.mount_point
        inside = target == mp or target.startswith(mp.rstrip("/") + "/")
        if inside and (best is None or len(mp) >= len(best.mount_point)):
            best = entry
    if best and st_dev and best.device != st_dev:
        # A bind mount or overlay can hide the real device; trust stat() for the device.
        return MountEntry(best.mount_point, st_dev, best.fstype, best.source, best.options)
    return best


def parse_scheduler(text: str) -> str | None:
    """'none [mq-deadline] kyber' -> 'mq-deadline'."""
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    return text.strip() or None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _block_name(devnum: str, sys_root: Path) -> str | None:
    link = sys_root / "dev" / "block" / devnum
    try:
        return link.resolve().name if link.exists() else None
    except OSError:
        return None


def _whole_disk(name: str, sys_root: Path) -> str:
    """A partition's parent disk ('vda1' -> 'vda'); a whole disk is itself."""
    node = (sys_root / "class" / "block" / name).resolve()
    if (node / "partition").exists():
        return node.parent.name
    return name


def _driver(device: Path) -> str | None:
    """The kernel driver bound to a disk's device (an NVMe namespace's is its controller's)."""
    for link in (device / "driver", device / "device" / "driver"):
        try:
            if link.is_symlink():
                return link.resolve().name
        except OSError:
            return None
    return None


def block_device(devnum: str, sys_root: Path = SYS, _depth: int = 0) -> dict[str, JSONValue]:
    """Facts about the block device with number 'major:minor'."""
    name = _block_name(devnum, sys_root)
    if name is None:
        return {"devnum": devnum, "name": None, "note": "not a block device (virtual filesystem)"}
    disk = _whole_disk(name, sys_root)
    queue = sys_root / "block" / disk / "queue"
    info: dict[str, JSONValue] = {"devnum": devnum, "name": name, "disk": disk}
    if name != disk:
        info["partition"] = name
    model = _read(sys_root / "block" / disk / "device" / "model")
    if model:
        info["model"] = model
    rotational = _read(queue / "rotational")
    if rotational is not None:
        info["rotational"] = rotational == "1"
    # Whether the device keeps writes in a volatile cache until a flush ("write back") or
    # not ("write through"), and which driver serves it (virtio_blk: a virtual disk, whose
    # rotational flag says nothing of the medium): the durability rules read both.
    write_cache = _read(queue / "write_cache")
    if write_cache:
        info["write_cache"] = write_cache
    driver = _driver(sys_root / "block" / disk / "device")
    if driver:
        info["driver"] = driver
    scheduler = _read(queue / "scheduler")
    if scheduler is not None:
        info["scheduler"] = parse_scheduler(scheduler)
    read_ahead = _read(queue / "read_ahead_kb")
    if read_ahead is not None and read_ahead.isdigit():
        info["read_ahead_kb"] = int(read_ahead)
    backing = _read(sys_root / "block" / disk / "loop" / "backing_file")
    if backing and _depth < 4:
        info["loop_backing_file"] = backing
        try:
            st = os.stat(backing)
            info["backing_device"] = block_device(
                f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}", sys_root, _depth + 1
            )
        except OSError:
            info["backing_device"] = None
    return info


def describe_path(path: Path) -> dict[str, JSONValue]:
    """Filesystem and device of an existing path, for the run record."""
    path = path.resolve()
    st = os.stat(path)
    devnum = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    try:
        entries = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    except OSError:
        entries = []
    mount = mount_for(path, entries, devnum)
    info: dict[str, JSONValue] = {"path": str(path)}
    if mount:
        info.update(
            mount_point=mount.mount_point,
            fstype=mount.fstype,
            source=mount.source,
            mount_options=mount.options,
        )
    device = block_device(devnum)
    backing = device.get("loop_backing_file")
    if isinstance(backing, str):  # a loop device on a file: on which filesystem (tmpfs?)
        under = mount_for(Path(backing), entries)
        if under is not None:
            device["backing_fstype"] = under.fstype
    info["device"] = device
    return info


def same_filesystem(a: Path, b: Path) -> bool:
    return os.stat(a).st_dev == os.stat(b).st_dev


def whole_disk_number(path: Path, sys_root: Path = SYS) -> str | None:
    """'MAJ:MIN' of the whole disk under the filesystem holding `path` (where cgroups count
    and limit I/O), or None on a filesystem without one (tmpfs, overlay)."""
    device = describe_path(path).get("device")
    disk = device.get("disk") if isinstance(device, dict) else None
    if not isinstance(disk, str):
        return None
    return _read(sys_root / "class" / "block" / disk / "dev")
