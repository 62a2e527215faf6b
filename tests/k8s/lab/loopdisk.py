"""The lab's block device of its own: a sparse image file in run/, formatted ext4, attached to
a loop device and mounted at run/wal-disk, under which the `lab-wal` class makes its volumes.

Every other class is a directory on the disk of the lab's cache (or a tmpfs): a volume of
theirs and a `lab-wal` one are on different devices, so per-device counters (a pod's cgroup
I/O, /proc/diskstats) tell their I/O apart (the WAL volume of lab/pg, tests/k8s/lab/cnpg.py).

Only the lab's own loop devices are ever detached: those whose backing file is below its run
dir. `down` unmounts (with everything below run/) and then detaches them, and so does the
next `up`/`down` after a SIGKILLed session, found by their backing file, without a record.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from howfast.iolimits import COUNTING_FILE, counting_line
from tests.k8s.lab import hoststate
from tests.k8s.lab.proc import LabError, log, run

IMAGE_NAME = "wal-disk.img"
# Sparse: the file takes only what is written. Room for both instances' pg_wal (max_wal_size
# 1 GB each at worst) and the tests' volumes; mkfs writes ~20 MB of metadata lazily.
IMAGE_SIZE = 4 << 30
SYS_BLOCK = Path("/sys/block")
# a blkio cgroup of the lab's own, made and removed at once, where the counting rule is written
COUNT_CGROUP = "howfast-lab-count"


def image_path(run_dir: Path) -> Path:
    return run_dir / IMAGE_NAME


def _backing_file(loop: Path) -> str | None:
    try:
        text = (loop / "loop" / "backing_file").read_text().strip()
    except OSError:
        return None  # not attached
    return text.removesuffix(" (deleted)")  # the kernel's mark for an unlinked file


def lab_loop_devices(run_dir: Path) -> list[str]:
    """/dev/loopN of every loop device whose backing file is below `run_dir`: the lab's own."""
    prefix = str(run_dir).rstrip("/") + "/"
    found = []
    for loop in sorted(SYS_BLOCK.glob("loop*")):
        backing = _backing_file(loop)
        if backing is not None and backing.startswith(prefix):
            found.append(f"/dev/{loop.name}")
    return found


def setup(run_dir: Path, mount_point: Path) -> str:
    """Make, attach and mount the image; return its loop device. What it leaves on failure is
    found by `detach_all` (backing file below run/) and `hoststate.unmount_all_under`."""
    image = image_path(run_dir)
    with image.open("wb") as f:
        f.truncate(IMAGE_SIZE)
    run(
        [
            "mkfs.ext4", "-q", "-F", "-m", "0", "-L", "howfast-lab-wal",
            "-E", "lazy_itable_init=1,lazy_journal_init=1", image,
        ]
    )  # fmt: skip
    device = run(["losetup", "--find", "--show", image]).stdout.strip()
    mount_point.mkdir(exist_ok=True)
    run(["mount", "-t", "ext4", device, mount_point])
    why = _count_io_on(device)
    if why is not None:
        raise LabError(why)
    return device


def _count_io_on(device: str) -> str | None:
    """On cgroup v1, make blkio count this device (see howfast.iolimits.COUNTING_FILE: since
    Linux 6.10 `blkio.throttle.io_service_bytes` reads 0 for a disk that never had a throttle
    rule): a no-limit rule written once, in a cgroup of the lab's own removed at once. None
    when done (or not needed), else why not."""
    if hoststate.cgroup_v2():
        return None
    hierarchies = [h for h in hoststate.cgroup_hierarchies() if (h / COUNTING_FILE).exists()]
    if not hierarchies:
        return None  # no blkio controller: nothing counts per cgroup anyway
    devnum = (SYS_BLOCK / Path(device).name / "dev").read_text().strip()
    group = hierarchies[0] / COUNT_CGROUP
    try:
        group.mkdir(exist_ok=True)
        rules = group / COUNTING_FILE
        line = counting_line(devnum, rules.read_text())
        if line is not None:
            rules.write_text(line)
    except OSError as exc:
        return f"cannot turn blkio counting on for {device} ({devnum}): {exc}"
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(group)
    return None


def count_cgroups() -> list[str]:
    """Where `_count_io_on` makes its cgroup (for `down`, after a SIGKILL in between)."""
    return [str(h / COUNT_CGROUP) for h in hoststate.cgroup_hierarchies()]


def detach_all(run_dir: Path, timeout: float = 120.0) -> list[str]:
    """Detach the lab's loop devices (unmounted first by the caller); return those still
    attached after `timeout` (a device still open is detached by the kernel when released:
    `losetup -d` sets autoclear). A filesystem unmounted lazily holds its device until its
    last user is gone and its dirty data is written back through the loop device: on a busy
    machine, after the pods' PostgreSQL wrote to it, that took over 5 s in CI and over 30 s
    beside a whole loaded `make test` here; `down` then kept all of run/ (test_two_nodes
    failed on it). The wait ends as soon as the devices are released."""
    for device in lab_loop_devices(run_dir):
        proc = run(["losetup", "-d", device], check=False)
        if proc.returncode != 0:
            log(f"losetup -d {device}: {proc.stderr.strip()}")
        else:
            log(f"loop device {device} detached")
    started = time.monotonic()
    while lab_loop_devices(run_dir) and time.monotonic() < started + timeout:
        time.sleep(0.1)
    left = lab_loop_devices(run_dir)
    if not left and time.monotonic() - started > 1:
        log(f"loop devices released {time.monotonic() - started:.1f}s after their detach")
    return left
