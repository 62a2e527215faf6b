"""What this machine offers howfast, and what each missing piece disables."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from howfast.checks import Check
from howfast.machine.pgbin import INSTALL_HINT, SERVER_PROGRAMS, PgInstall, find_installs
from howfast.plugin.registry import programs
from howfast.plugin.workload import Program
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
    checks += [_installed_program_check(best, p) for p in programs("postgres")]
    return checks


def _install_check(inst: PgInstall, *, used: bool, pinned: bool = False) -> Check:
    """One installation: its programs; with --pg-bin, the server programs it lacks are
    required (a run with it would refuse to start)."""
    chosen = (" (used)" if pinned else " (used by default)") if used else ""
    names = [*SERVER_PROGRAMS, *(p.name for p in programs("postgres"))]
    progs = [p for p in names if inst.program(p)]
    return Check(
        f"postgresql {inst.version}",
        inst.has_server,
        f"{inst.bindir} via {inst.source}{chosen}: {', '.join(progs) or 'no programs'}",
        None if inst.has_server else "local targets with this version",
        None if inst.has_server else INSTALL_HINT,
        required=used and pinned,
    )


def _installed_program_check(install: PgInstall, program: Program) -> Check:
    """A program a workload runs from the PostgreSQL installation howfast uses (pgbench)."""
    found = install.program(program.name)
    return Check(
        program.name,
        found is not None,
        str(found or "not found"),
        program.needed_for,
        program.hint or INSTALL_HINT,
        required=program.required,
    )


def path_program_check(program: Program) -> Check:
    """A program a workload runs from PATH (fio), with the version it says."""
    found = shutil.which(program.name)
    version = _version_of(found, list(program.version_args)) if found else None
    return Check(
        program.name,
        found is not None,
        f"{found} ({version})" if found else "not found",
        program.needed_for,
        program.hint,
        required=program.required,
    )


def all_checks(pg_bin: str | None = None) -> list[Check]:
    """PostgreSQL's programs and those the workloads run (plugin/workload.py `programs`:
    pgbench, pg_test_fsync, fio) on this machine, then each target kind's own checks
    (directories: cgroups, emulated volumes, this machine; k8s://: the cluster)."""
    path_checks = [path_program_check(p) for p in programs("path")]
    return [*postgres_checks(pg_bin), *path_checks, *kind_checks()]
