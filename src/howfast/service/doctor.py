"""What this machine offers howfast, and what each missing piece disables."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from howfast.checks import Check
from howfast.machine.pgbin import INSTALL_HINT, PgInstall, find_installs


def _version_of(program: str, args: list[str]) -> str | None:
    try:
        out = subprocess.run(
            [program, *args], capture_output=True, text=True, timeout=10, check=False
        )
    except OSError:
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else None


def pg_bin_problem(pg_bin: str) -> str | None:
    """Why --pg-bin names no PostgreSQL bin directory, or None."""
    path = Path(pg_bin)
    if not path.exists():
        return f"{pg_bin} does not exist"
    if not path.is_dir():
        return f"{pg_bin} is not a directory (give the directory that holds postgres and pgbench)"
    return None


def pinned_install_check(pg_bin: str, installs: list[PgInstall]) -> Check | None:
    """A failed check when --pg-bin is not a PostgreSQL bin directory: what a run with the
    same --pg-bin would refuse, and nothing else may stand in for it."""
    if any(i.source == "--pg-bin" for i in installs):
        return None
    problem = pg_bin_problem(pg_bin) or f"{pg_bin} holds no PostgreSQL programs"
    return Check(
        f"--pg-bin {pg_bin}",
        False,
        problem,
        "every command given this --pg-bin",
        "give the bin directory of a PostgreSQL install, e.g. /usr/lib/postgresql/VERSION/bin, "
        "or drop --pg-bin to use the newest found",
        required=True,
    )


def postgres_checks(pg_bin: str | None = None) -> list[Check]:
    installs = find_installs(pg_bin)
    checks: list[Check] = []
    pinned = pinned_install_check(pg_bin, installs) if pg_bin is not None else None
    if pinned is not None:
        # The installs found elsewhere are listed, but none is "used by default" nor makes
        # pgbench "ok": a run with this --pg-bin would not use them.
        return [pinned, *(_install_check(inst, used=False) for inst in installs)]
    if not installs:
        return [
            Check(
                "postgresql",
                False,
                "no PostgreSQL installation found",
                "everything",
                INSTALL_HINT,
                required=True,
            ),
        ]
    for i, inst in enumerate(installs):
        checks.append(_install_check(inst, used=i == 0, pinned=pg_bin is not None))
    best = installs[0]
    checks.append(
        Check(
            "pgbench",
            best.program("pgbench") is not None,
            str(best.program("pgbench") or "not found"),
            "every PostgreSQL benchmark",
            INSTALL_HINT,
            required=True,
        )
    )
    checks.append(
        Check(
            "pg_test_fsync",
            best.program("pg_test_fsync") is not None,
            str(best.program("pg_test_fsync") or "not found"),
            "the fsync method comparison of `howfast probe`",
            INSTALL_HINT,
        )
    )
    return checks


def _install_check(inst: PgInstall, *, used: bool, pinned: bool = False) -> Check:
    """One installation: its programs; with --pg-bin, the server programs it lacks are
    required (a run with it would refuse to start)."""
    chosen = (" (used)" if pinned else " (used by default)") if used else ""
    progs = [
        p for p in ("initdb", "pg_ctl", "postgres", "pgbench", "pg_test_fsync") if inst.program(p)
    ]
    return Check(
        f"postgresql {inst.version}",
        inst.has_server,
        f"{inst.bindir} via {inst.source}{chosen}: {', '.join(progs) or 'no programs'}",
        None if inst.has_server else "local targets with this version",
        None if inst.has_server else INSTALL_HINT,
        required=used and pinned,
    )


def fio_check() -> Check:
    fio = shutil.which("fio")
    version = _version_of(fio, ["--version"]) if fio else None
    return Check(
        "fio",
        fio is not None,
        f"{fio} ({version})" if fio else "not found",
        "storage probes (`howfast probe`, probe steps in plans)",
        "sudo apt-get install -y fio",
    )


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


def kernel_release() -> str:
    return re.sub(r"\s+", " ", os.uname().release)


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


def all_checks(pg_bin: str | None = None) -> list[Check]:
    return [
        *postgres_checks(pg_bin),
        fio_check(),
        *cgroup_checks(),
        *emulated_volume_checks(),
        *system_checks(),
        *_kubernetes_checks(),
    ]


def _kubernetes_checks() -> list[Check]:
    """The cluster, its StorageClasses and permissions, when a kubeconfig is present."""
    from howfast.targets.k8s.doctor import kubeconfig_present, kubernetes_checks

    return kubernetes_checks() if kubeconfig_present() else []
