"""Which PostgreSQL install a run uses on this machine: what its targets' kinds need of it
(targets/registry.py `local_install`), or none when every tool runs elsewhere (in a pod)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from howfast.machine.pgbin import PgInstall, choose_install
from howfast.targets import registry as target_kinds

# No install here: every tool runs in the pods, from their image.
NO_INSTALL = PgInstall(bindir=Path("/usr/lib/postgresql"), version="", source="none")


def local_install(
    texts: Sequence[str], pg_bin: str | None, info: Callable[[str], None]
) -> PgInstall:
    """--pg-bin, else the newest install with what the targets need; said on `info`."""
    needs = target_kinds.local_install(texts)
    if needs == "none":
        return NO_INSTALL
    install = choose_install(pg_bin, need_server=needs == "server")
    info(f"using PostgreSQL {install.version} from {install.bindir} ({install.source})")
    return install
