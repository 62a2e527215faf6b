"""Finding PostgreSQL's programs: --pg-bin, pg_config --bindir, PATH, /usr/lib/postgresql/*/bin."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from howfast.errors import MissingToolError

SERVER_PROGRAMS = ("initdb", "pg_ctl", "postgres")
INSTALL_HINT = "install it with: sudo apt-get install -y postgresql postgresql-contrib"
_VERSION_RE = re.compile(r"\(PostgreSQL\)\s+(\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class PgInstall:
    """One PostgreSQL installation: its bin directory and version ("15.18")."""

    bindir: Path
    version: str
    source: str  # how it was found: --pg-bin, pg_config, PATH, /usr/lib/postgresql

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def program(self, name: str) -> Path | None:
        path = self.bindir / name
        return path if path.is_file() else None

    @property
    def has_server(self) -> bool:
        return all(self.program(p) for p in SERVER_PROGRAMS)


def parse_version(text: str) -> str | None:
    """'postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)' -> '15.18'."""
    match = _VERSION_RE.search(text)
    return match.group(1) if match else None


def program_version(path: Path) -> str | None:
    try:
        out = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except OSError:
        return None
    return parse_version(out.stdout)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def _install_at(bindir: Path, source: str) -> PgInstall | None:
    # Debian's /usr/bin/pgbench is a wrapper script; resolve to the real bin dir via postgres,
    # falling back to pgbench for client-only installs.
    for probe in ("postgres", "pgbench", "psql"):
        path = bindir / probe
        if path.is_file():
            version = program_version(path)
            if version:
                return PgInstall(bindir=bindir.resolve(), version=version, source=source)
    return None


def find_installs(pg_bin: str | None = None) -> list[PgInstall]:
    """All PostgreSQL installations found, newest first, without duplicates."""
    candidates: list[tuple[Path, str]] = []
    if pg_bin:
        candidates.append((Path(pg_bin), "--pg-bin"))
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=False
        )
        if out.returncode == 0 and out.stdout.strip():
            candidates.append((Path(out.stdout.strip()), "pg_config"))
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append((Path(initdb).resolve().parent, "PATH"))
    for bindir in Path("/usr/lib/postgresql").glob("*/bin"):
        candidates.append((bindir, "/usr/lib/postgresql"))
    installs: list[PgInstall] = []
    seen: set[Path] = set()
    for bindir, source in candidates:
        if not bindir.is_dir() or bindir.resolve() in seen:
            continue
        install = _install_at(bindir, source)
        if install:
            seen.add(install.bindir)
            installs.append(install)
    pinned = [i for i in installs if i.source == "--pg-bin"]
    rest = sorted(
        (i for i in installs if i.source != "--pg-bin"),
        key=lambda i: _version_key(i.version),
        reverse=True,
    )
    return pinned + rest


def choose_install(pg_bin: str | None = None, *, need_server: bool = True) -> PgInstall:
    """The install to use: --pg-bin when given, else the newest with what we need."""
    installs = find_installs(pg_bin)
    if pg_bin and not any(i.source == "--pg-bin" for i in installs):
        raise MissingToolError(f"--pg-bin {pg_bin}: no PostgreSQL programs there", INSTALL_HINT)
    for install in installs:
        if install.program("pgbench") and (install.has_server or not need_server):
            return install
        if pg_bin:
            missing = [p for p in (*SERVER_PROGRAMS, "pgbench") if not install.program(p)]
            raise MissingToolError(f"--pg-bin {pg_bin}: missing {', '.join(missing)}", INSTALL_HINT)
    what = "PostgreSQL server programs (initdb, pg_ctl, postgres) and pgbench"
    if not need_server:
        what = "pgbench"
    raise MissingToolError(f"no {what} found", INSTALL_HINT)
