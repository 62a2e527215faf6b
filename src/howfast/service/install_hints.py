"""The commands that install the programs howfast runs, per operating system family, for
`howfast doctor` and the README: PostgreSQL's server, and the programs the workloads declare
(plugin/workload.py `Program`: those in PostgreSQL's installation come with its packages, one
on PATH names its own). Which tools are missing in, commands out; reading /etc/os-release is
the caller's (this_family)."""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from howfast.checks import Check
from howfast.model import JSONValue
from howfast.plugin.registry import programs
from howfast.plugin.workload import Program

SERVER = "postgresql"  # the tool name of PostgreSQL's server, whichever install doctor found
HOMEBREW_POSTGRESQL = "postgresql@17"

# family -> packages. Debian's postgresql-NN holds the server, pgbench and pg_test_fsync;
# Fedora's and RHEL's postgresql-server the server, postgresql-contrib the other programs;
# Homebrew's formula the whole of PostgreSQL.
SERVER_PACKAGES: dict[str, tuple[str, ...]] = {
    "debian": ("postgresql", "postgresql-contrib"),
    "rhel": ("postgresql-server", "postgresql-contrib"),
    "macos": (HOMEBREW_POSTGRESQL,),
}
POSTGRES_PROGRAM_PACKAGES: dict[str, tuple[str, ...]] = {
    "debian": ("postgresql", "postgresql-contrib"),
    "rhel": ("postgresql-contrib",),
    "macos": (HOMEBREW_POSTGRESQL,),
}


def _packages(program: Program) -> Mapping[str, tuple[str, ...]] | None:
    if program.packages is not None:
        return program.packages
    return POSTGRES_PROGRAM_PACKAGES if program.source == "postgres" else None


def tool_packages() -> dict[str, Mapping[str, tuple[str, ...]]]:
    """tool -> family -> packages, in the order commands name their packages: the server,
    the workloads' programs in PostgreSQL's installation, then those on PATH (the programs
    without a package known are not there)."""
    found: dict[str, Mapping[str, tuple[str, ...]]] = {SERVER: SERVER_PACKAGES}
    for program in sorted(programs(), key=lambda p: p.source != "postgres"):  # stable
        known = _packages(program)
        if known is not None:
            found.setdefault(program.name, known)
    return found


def _postgres_tools() -> set[str]:
    return {SERVER, *(p.name for p in programs("postgres"))}


FAMILY_NAMES = {
    "debian": "Debian/Ubuntu",
    "rhel": "RHEL family (RHEL, Rocky, Alma, CentOS Stream, Fedora)",
    "macos": "macOS (Homebrew)",
}
PREFIX = {
    "debian": "sudo apt-get install -y",
    "rhel": "sudo dnf install -y",
    "macos": "brew install",
}
NOTES = {
    # Homebrew does not link a versioned PostgreSQL into its bin directory.
    "macos": f'then give --pg-bin "$(brew --prefix {HOMEBREW_POSTGRESQL})/bin", or put that '
    "directory on PATH",
}
_DEBIAN_IDS = {"debian", "ubuntu"}
_RHEL_IDS = {"rhel", "centos", "fedora", "rocky", "almalinux", "ol", "amzn"}


@dataclass(frozen=True)
class InstallCommand:
    family: str
    name: str
    command: str
    note: str | None = None
    this_machine: bool = False

    def document(self) -> dict[str, JSONValue]:
        return {
            "family": self.family,
            "name": self.name,
            "command": self.command,
            "note": self.note,
            "this_machine": self.this_machine,
        }


def os_family(os_release: str | None, system: str) -> str | None:
    """'debian', 'rhel', 'macos' from /etc/os-release's ID and ID_LIKE (or the system's
    name, 'Darwin'); None for any other."""
    if system == "Darwin":
        return "macos"
    ids: set[str] = set()
    for line in (os_release or "").splitlines():
        key, _, value = line.partition("=")
        if key.strip() in ("ID", "ID_LIKE"):
            ids |= set(value.strip().strip("\"'").lower().split())
    if ids & _DEBIAN_IDS:
        return "debian"
    if ids & _RHEL_IDS:
        return "rhel"
    return None


def this_family(os_release: Path = Path("/etc/os-release")) -> str | None:
    try:
        text: str | None = os_release.read_text()
    except OSError:
        text = None
    return os_family(text, platform.system())


def install_command(family: str, tools: Iterable[str]) -> str | None:
    """The one command that installs `tools` on `family`; None when there is nothing."""
    wanted = set(tools)
    packages = [
        p
        for tool, by_family in tool_packages().items()
        if tool in wanted
        for p in by_family.get(family, ())
    ]
    if not packages:
        return None
    return f"{PREFIX[family]} {' '.join(dict.fromkeys(packages))}"


def install_commands(tools: Iterable[str], this: str | None = None) -> list[InstallCommand]:
    """One command per family for the missing `tools` (none when nothing is missing), this
    machine's family first."""
    wanted = list(tools)
    postgres = bool(_postgres_tools() & set(wanted))  # the notes are about PostgreSQL's
    found = [
        InstallCommand(
            family,
            FAMILY_NAMES[family],
            command,
            NOTES.get(family) if postgres else None,
            family == this,
        )
        for family in FAMILY_NAMES
        if (command := install_command(family, wanted)) is not None
    ]
    return sorted(found, key=lambda c: not c.this_machine)


def missing_tools(checks: Sequence[Check]) -> list[str]:
    """The tools doctor found missing: PostgreSQL's server when no install has one."""
    missing = []
    postgres = [c for c in checks if c.name == SERVER or c.name.startswith(SERVER + " ")]
    if not any(c.ok for c in postgres):
        missing.append(SERVER)
    tools = tool_packages()
    for check in checks:
        if check.name != SERVER and check.name in tools and not check.ok:
            missing.append(check.name)
    return missing


def with_install_hints(checks: Sequence[Check], family: str | None) -> list[Check]:
    """The checks, each missing tool's hint made this machine's install command (the
    checks' own hints, Debian's, stay where the family is unknown)."""
    if family is None:
        return list(checks)
    out = []
    tools = tool_packages()
    for check in checks:
        tool = SERVER if check.name.startswith(SERVER) else check.name
        command = install_command(family, [tool]) if tool in tools and not check.ok else None
        out.append(replace(check, hint=f"install it with: {command}") if command else check)
    return out
