"""Turning a --target argument into a Target, with the run's options as separate arguments:
what cli/run.py calls until it builds TargetOptions itself and asks the registry
(targets/registry.py: parse_kind_options, make_targets). Delete once it does."""

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
    """The one target of `text` without emulated volumes (cli/run.py makes those itself)."""
    options = TargetOptions(
        install,
        wal_dir=wal_dir,
        settings=settings,
        keep=keep,
        overwrite=overwrite,
        checksums=checksums,
        memory_limit=memory_limit,
        kind_options={"k8s": kubernetes} if kubernetes is not None else {},
    )
    (target,) = kind_for(text).create(text, options)
    return target
