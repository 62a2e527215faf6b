"""The install commands `howfast doctor` prints for what is missing, per OS family (pure);
doctor itself with the tools hidden is in tests/integration/test_wheel.py."""

from __future__ import annotations

import pytest

from howfast.checks import Check
from howfast.service.install_hints import (
    install_command,
    install_commands,
    missing_tools,
    os_family,
    with_install_hints,
)

DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'
UBUNTU = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n'
ROCKY = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.4"\n'
FEDORA = "NAME=Fedora\nID=fedora\nVERSION_ID=40\n"
AMAZON = 'NAME="Amazon Linux"\nID="amzn"\nID_LIKE="fedora"\n'
MINT = "NAME=Linuxmint\nID=linuxmint\nID_LIKE=ubuntu\n"
ALPINE = "NAME=Alpine Linux\nID=alpine\n"


@pytest.mark.parametrize(
    ("text", "system", "family"),
    [
        (DEBIAN, "Linux", "debian"),
        (UBUNTU, "Linux", "debian"),
        (MINT, "Linux", "debian"),
        (ROCKY, "Linux", "rhel"),
        (FEDORA, "Linux", "rhel"),
        (AMAZON, "Linux", "rhel"),
        (ALPINE, "Linux", None),
        (None, "Linux", None),
        (None, "Darwin", "macos"),
    ],
)
def test_the_family_from_os_release(text: str | None, system: str, family: str | None) -> None:
    assert os_family(text, system) == family


def test_exact_commands_per_family() -> None:
    everything = ["postgresql", "pgbench", "pg_test_fsync", "fio"]
    assert (
        install_command("debian", everything)
        == "sudo apt-get install -y postgresql postgresql-contrib fio"
    )
    assert (
        install_command("rhel", everything)
        == "sudo dnf install -y postgresql-server postgresql-contrib fio"
    )
    assert install_command("macos", everything) == "brew install postgresql@17 fio"
    # On RHEL pgbench and pg_test_fsync come with -contrib, the server apart
    assert install_command("rhel", ["pgbench"]) == "sudo dnf install -y postgresql-contrib"
    assert install_command("debian", ["fio"]) == "sudo apt-get install -y fio"
    assert install_command("debian", []) is None


def test_one_command_per_family_this_machine_first() -> None:
    commands = install_commands(["fio"], this="rhel")
    assert [c.family for c in commands] == ["rhel", "debian", "macos"]
    assert [c.this_machine for c in commands] == [True, False, False]
    assert all(c.note is None for c in commands)  # the Homebrew note is about PostgreSQL
    with_postgres = install_commands(["pgbench"], this=None)
    assert [c.family for c in with_postgres] == ["debian", "rhel", "macos"]
    assert with_postgres[2].note is not None and "--pg-bin" in with_postgres[2].note
    assert install_commands([], this="debian") == []


def checks(*, server: bool = True, pgbench: bool = True, fio: bool = True) -> list[Check]:
    return [
        Check("postgresql 15.18", server, "/usr/lib/postgresql/15/bin via PATH"),
        Check("pgbench", pgbench, "", required=True),
        Check("pg_test_fsync", pgbench, ""),
        Check("fio", fio, "", hint="sudo apt-get install -y fio"),
        Check("loop devices", False, "not usable", hint="run as root"),
    ]


def test_what_is_missing_from_the_checks() -> None:
    assert missing_tools(checks()) == []
    assert missing_tools(checks(fio=False)) == ["fio"]
    assert missing_tools(checks(server=False, pgbench=False)) == [
        "postgresql",
        "pgbench",
        "pg_test_fsync",
    ]
    nothing = [Check("postgresql", False, "no PostgreSQL installation found", required=True)]
    assert missing_tools(nothing) == ["postgresql"]


def test_hints_become_this_machines_command() -> None:
    found = with_install_hints(checks(pgbench=False, fio=False), "rhel")
    hints = {c.name: c.hint for c in found}
    assert hints["pgbench"] == "install it with: sudo dnf install -y postgresql-contrib"
    assert hints["fio"] == "install it with: sudo dnf install -y fio"
    assert hints["loop devices"] == "run as root"  # not a package: left as it was
    assert hints["postgresql 15.18"] is None  # found: no hint
    unknown = with_install_hints(checks(fio=False), None)
    assert {c.name: c.hint for c in unknown}["fio"] == "sudo apt-get install -y fio"
