"""Checking postgresql.conf settings with the installed server itself, before a run.

`postgres -D DIR -C port -c name=value ...` on a scratch directory holding an empty
postgresql.conf reads the settings exactly as the server would at start, and stops at the
first unknown name or invalid value, without a data directory or a running server. Each
refusal is noted and the rest checked again, so every bad setting is reported at once. The
names `postgres --describe-config` prints are where a misspelt name's suggestion comes from.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from howfast.errors import UsageError
from howfast.machine.memory import MemoryBasis, shared_memory_problem
from howfast.machine.pgbin import PgInstall
from howfast.targets.leftovers.marks import write_owner
from howfast.targets.osuser import server_user

_PARAMETER = re.compile(r'parameter "([^"]+)"')
_MESSAGE = re.compile(r"^.*?(?:FATAL|ERROR):\s+(.*)$")
_HINT = re.compile(r"^.*?HINT:\s+(.*)$")


@dataclass(frozen=True)
class SettingSource:
    """A setting as given: `where` names it for the user (`--set`, or file:line: key)."""

    name: str
    value: str
    where: str


def known_names(postgres: Path) -> list[str]:
    """Every setting name of this PostgreSQL version (`postgres --describe-config`; it leaves
    out developer options, which are still accepted: this only feeds suggestions)."""
    try:
        out = subprocess.run(
            [str(postgres), "--describe-config"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.split("\t", 1)[0] for line in out.stdout.splitlines() if "\t" in line]


def _first_refusal(postgres: Path, scratch: Path, items: list[SettingSource]) -> str | None:
    """The server's message about the first setting it refuses; None when all are accepted."""
    argv = [str(postgres), "-D", str(scratch), "-C", "port"]
    for item in items:
        argv += ["-c", f"{item.name}={item.value}"]
    user = server_user()
    kwargs = dict(user.subprocess_kwargs()) if user.uid != os.geteuid() else {}
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, **kwargs)  # type: ignore[call-overload]
    if out.returncode == 0:
        return None
    lines = str(out.stderr).splitlines()
    message = next((m[1] for line in lines if (m := _MESSAGE.match(line))), None)
    hint = next((m[1] for line in lines if (m := _HINT.match(line))), None)
    text = message or (lines[-1] if lines else f"exit status {out.returncode}")
    return f"{text} ({hint.rstrip('.')})" if hint else text


def check_settings(install: PgInstall, items: list[SettingSource]) -> None:
    """UsageError listing every setting this PostgreSQL would refuse, with the closest name
    for a misspelt one. Nothing to check without a `postgres` program (a server URI only)."""
    postgres = install.program("postgres")
    if postgres is None or not items:
        return
    user = server_user()
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    scratch = Path(tempfile.mkdtemp(prefix="howfast-settings-", dir=base))
    write_owner(scratch)  # a howfast killed meanwhile leaves it: howfast cleanup removes it
    errors: list[str] = []
    try:
        (scratch / "postgresql.conf").write_text("")
        if user.uid != os.geteuid():
            for path in (scratch, scratch / "postgresql.conf"):
                os.chown(path, user.uid, user.gid)
        remaining = list(items)
        while remaining:
            refusal = _first_refusal(postgres, scratch, remaining)
            if refusal is None:
                break
            match = _PARAMETER.search(refusal)
            name = match[1].lower() if match else None
            bad = [i for i in remaining if i.name.lower() == name]
            if not bad:  # a refusal naming no setting: report it once, as it is
                errors.append(f"PostgreSQL {install.version} refuses the settings: {refusal}")
                break
            for item in bad:
                errors.append(_explain(item, refusal, postgres))
            remaining = [i for i in remaining if i not in bad]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if errors:
        raise UsageError(
            "\n".join(errors),
            f"settings are checked against PostgreSQL {install.version} before anything runs",
        )


def _explain(item: SettingSource, refusal: str, postgres: Path) -> str:
    if refusal.startswith("unrecognized configuration parameter"):
        close = difflib.get_close_matches(item.name.lower(), known_names(postgres), n=1)
        guess = f"; did you mean {close[0]!r}?" if close else ""
        return f"{item.where}: unknown setting {item.name!r}{guess}"
    return f"{item.where}: {refusal}"


def check_shared_memory(items: list[SettingSource], basis: MemoryBasis | None) -> None:
    """UsageError for settings whose shared memory cannot fit in the server's memory
    (`shared_buffers = 1TB`): the server would fail to start, or, where the kernel overcommits
    memory, spend minutes starting and then fail. Nothing to check when the memory is unknown."""
    if basis is None:
        return
    problems = [
        f"{item.where}: {problem}"
        for item in items
        if (problem := shared_memory_problem(item.name, item.value, basis))
    ]
    if problems:
        raise UsageError(
            "\n".join(problems),
            "lower the setting: shared_buffers is commonly a quarter of the memory",
        )
