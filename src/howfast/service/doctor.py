"""What this machine offers howfast, and what each missing piece disables."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from howfast.checks import Check
from howfast.machine.pgbin import INSTALL_HINT, PgInstall, find_installs
from howfast.targets.registry import kind_checks


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


def all_checks(pg_bin: str | None = None) -> list[Check]:
    """PostgreSQL's programs and fio on this machine, then each target kind's own checks
    (directories: cgroups, emulated volumes, this machine; k8s://: the cluster)."""
    return [*postgres_checks(pg_bin), fio_check(), *kind_checks()]
