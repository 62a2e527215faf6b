"""Loop devices that no one has used since boot: a new device number, added through
/dev/loop-control and removed again after the test.

Why new ones: a disk keeps some kernel state until reboot. On Linux 6.10 and later cgroup
v1's blkio counters count nothing on a disk that never had a throttle rule, and once any cgroup
set one there, they count in every cgroup. A reused /dev/loopN may carry that state from an
earlier test (a fleet or an --storage-iops run), which hid the defect on some test orders. A
device with a number never used since boot is what a freshly booted machine's disk is.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

LOOP_CTL_ADD = 0x4C80
LOOP_CTL_REMOVE = 0x4C81
FIRST_INDEX = 1000  # far above what `losetup --find` hands out, so others do not take ours


def _unused_index() -> int:
    while True:
        index = FIRST_INDEX + secrets.randbelow(100_000)
        if not Path(f"/sys/class/block/loop{index}").exists():
            return index


@contextlib.contextmanager
def fresh_loop_device(image: Path) -> Iterator[str]:
    """Attach `image` to a loop device made for it; yield /dev/loopN; detach and remove it."""
    control = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
    try:
        index = _unused_index()
        fcntl.ioctl(control, LOOP_CTL_ADD, index)
        device = f"/dev/loop{index}"
        attached = subprocess.run(
            ["losetup", device, str(image)], capture_output=True, text=True, check=False
        )
        if attached.returncode != 0:
            with contextlib.suppress(OSError):
                fcntl.ioctl(control, LOOP_CTL_REMOVE, index)
            raise RuntimeError(f"losetup {device}: {attached.stderr.strip()}")
        try:
            yield device
        finally:
            subprocess.run(["losetup", "-d", device], capture_output=True, check=False)
            with contextlib.suppress(OSError):  # busy: a lazy unmount still holds it
                fcntl.ioctl(control, LOOP_CTL_REMOVE, index)
    finally:
        os.close(control)


def throttle_ever_set(devnum: str) -> bool:
    """Whether the kernel's blk-throttle already counts on this disk (a rule was written
    there since boot): the root cgroup then lists it in blkio.throttle.io_service_bytes."""
    root = Path("/sys/fs/cgroup/blkio/blkio.throttle.io_service_bytes")
    try:
        return any(line.split()[:1] == [devnum] for line in root.read_text().splitlines())
    except OSError:
        return False
