"""Turning a --target argument into a Target."""

from __future__ import annotations

from pathlib import Path

from howfast.errors import UsageError
from howfast.targets.base import Target
from howfast.targets.dsn import DsnTarget
from howfast.targets.local import LocalTarget
from howfast.targets.pgbin import PgInstall


def is_dsn(text: str) -> bool:
    return text.startswith(("postgresql://", "postgres://"))


def make_target(
    text: str,
    install: PgInstall,
    *,
    wal_dir: Path | None,
    settings: dict[str, str],
    keep: bool,
    overwrite: bool,
    checksums: bool,
    memory_limit: int | None = None,
) -> Target:
    if is_dsn(text):
        if wal_dir is not None:
            raise UsageError("--wal-dir applies to directory targets only, not to a server URI")
        if memory_limit is not None:
            raise UsageError(
                "--memory applies to directory targets only: howfast cannot cap the memory "
                "of an existing server (postgresql://...)",
                "drop --memory, or give --dataset SIZE to size the data for that server",
            )
        return DsnTarget(text, overwrite=overwrite)
    if text.startswith("k8s://"):
        raise UsageError("Kubernetes targets (k8s://CLASS) are not supported yet")
    if "://" in text:
        raise UsageError(f"unknown target {text!r}: give a directory or a postgresql:// URI")
    return LocalTarget(
        Path(text).expanduser(),
        install,
        wal_dir=wal_dir,
        settings=settings,
        keep=keep,
        checksums=checksums,
        memory_limit=memory_limit,
    )
