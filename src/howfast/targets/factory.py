"""Turning a --target argument into a Target: the target kind that recognises the text
(targets/registry.py, one module per kind in targets/kinds/) makes it."""

from __future__ import annotations

from pathlib import Path

from howfast.machine.pgbin import PgInstall
from howfast.targets.base import Target
from howfast.targets.k8s.spec import K8sOptions
from howfast.targets.kind import TargetOptions
from howfast.targets.registry import kind_for


def is_dsn(text: str) -> bool:
    """Whether `text` names an existing server (a postgresql:// URI)."""
    from howfast.targets.kinds.dsn import KIND

    return KIND.matches(text)


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
    kubernetes: K8sOptions | None = None,
) -> Target:
    options = TargetOptions(
        install,
        wal_dir=wal_dir,
        settings=settings,
        keep=keep,
        overwrite=overwrite,
        checksums=checksums,
        memory_limit=memory_limit,
        kubernetes=kubernetes,
    )
    return kind_for(text).create(text, options)
