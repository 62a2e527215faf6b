"""`howfast doctor` for directory targets: what this machine offers a cluster howfast makes
here (cgroups for --memory and I/O caps, emulated volumes, loop devices, the page cache, a
memory filesystem for the logs). The directory kind's doctor_checks."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from howfast.checks import Check


def cgroup_mode(root: Path = Path("/sys/fs/cgroup")) -> str:
    """'v2', 'v1', 'hybrid' (v1 controllers with an empty v2 hierarchy beside) or 'none'."""
    if (root / "cgroup.controllers").exists():
        return "v2"
    if (root / "memory").is_dir() or (root / "blkio").is_dir():
        return "hybrid" if (root / "unified").is_dir() else "v1"
    return "none"


def cgroup_checks(root: Path = Path("/sys/fs/cgroup")) -> list[Check]:
    mode = cgroup_mode(root)
    if mode == "v2":
        controllers = (root / "cgroup.controllers").read_text().split()
        writable = os.access(root, os.W_OK)
        mem = "memory" in controllers and writable
        io = "io" in controllers and writable
        return [
            Check(
                "cgroup memory limit",
                mem,
                f"cgroup v2, controllers: {' '.join(controllers)}"
                + ("" if writable else ", not writable (not root?)"),
                "--memory caps for on-disk working sets",
                "run as root",
            ),
            Check(
                "cgroup I/O throttling",
                io,
                "cgroup v2 io controller" if io else "unavailable",
                "QoS-capped storage emulation",
                "run as root",
            ),
        ]
    if mode in ("v1", "hybrid"):
        mem_dir, blkio = root / "memory", root / "blkio"
        mem = mem_dir.is_dir() and os.access(mem_dir, os.W_OK)
        io = (blkio / "blkio.throttle.read_bps_device").exists() and os.access(blkio, os.W_OK)
        return [
            Check(
                "cgroup memory limit",
                mem,
                f"cgroup {mode}, memory controller at {mem_dir}"
                + ("" if mem else " (not writable)"),
                "--memory caps for on-disk working sets",
                "run as root",
            ),
            Check(
                "cgroup I/O throttling",
                io,
                f"cgroup {mode} blkio throttle" + ("" if io else " unavailable or not writable"),
                "QoS-capped storage emulation",
                "run as root",
            ),
        ]
    return [
        Check(
            "cgroups",
            False,
            "no cgroup filesystem mounted",
            "--memory caps and I/O throttling",
            None,
        )
    ]


def system_checks() -> list[Check]:
    root = os.geteuid() == 0
    loop = Path("/dev/loop-control")
    loop_ok = loop.exists() and os.access(loop, os.W_OK) and shutil.which("losetup") is not None
    drop = Path("/proc/sys/vm/drop_caches")
    drop_ok = drop.exists() and os.access(drop, os.W_OK)
    shm = Path("/dev/shm")
    shm_ok = shm.is_dir() and os.access(shm, os.W_OK)
    return [
        Check(
            "user",
            True,
            "root: PostgreSQL will run as an unprivileged user (postgres or howfast)"
            if root
            else f"uid {os.geteuid()}: PostgreSQL runs as you",
        ),
        Check(
            "loop devices",
            loop_ok,
            "/dev/loop-control usable" if loop_ok else "not usable (needs root and losetup)",
            "storage emulated on loop devices",
            "run as root; apt-get install mount",
        ),
        Check(
            "drop_caches",
            drop_ok,
            str(drop) + (" writable" if drop_ok else " not writable"),
            "cold-cache reads (seqread) without a memory cap",
            "run as root",
        ),
        Check(
            "tmpfs for logs",
            shm_ok,
            "/dev/shm" if shm_ok else "no writable /dev/shm",
            None
            if shm_ok
            else "keeping pgbench logs off the disk under test (they go to the temp dir instead)",
            None,
        ),
    ]


def emulated_volume_checks() -> list[Check]:
    """--storage-latency / --storage-iops: which backend builds the volume, or why none
    (--storage-iops also needs the "cgroup I/O throttling" check above)."""
    from howfast.targets.emulated.volume import INSTALL_HINT as VOLUME_HINT
    from howfast.targets.emulated.volume import available

    backend = available()
    return [
        Check(
            "emulated volumes",
            backend.name is not None,
            backend.reason,
            None if backend.name else "--storage-latency and --storage-iops",
            None if backend.name else VOLUME_HINT,
        ),
    ]


def packet_filter_checks() -> list[Check]:
    """`partition` events cut a standby's replication with iptables (root)."""
    from howfast.machine.packetfilter import INSTALL_HINT, PacketFilter

    packets = PacketFilter()
    why = packets.unusable()
    return [
        Check(
            "iptables",
            why is None,
            f"{packets.program}: usable" if why is None else why,
            None if why is None else "partition events (a standby's replication cut)",
            None if why is None else ("run as root" if packets.program else INSTALL_HINT),
        ),
    ]


def local_checks() -> list[Check]:
    return [
        *cgroup_checks(),
        *emulated_volume_checks(),
        *system_checks(),
        *packet_filter_checks(),
    ]
