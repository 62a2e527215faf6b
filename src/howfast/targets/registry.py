"""Target kinds, found rather than listed: every module of howfast.targets.kinds defines a
module-level `KIND` (a TargetKind) that says how a `--target` text is recognised and makes
the Target. Adding a target kind is one new module there (plus the Target itself).

    kind = kind_for("postgresql://bench@db/bench")    # the dsn kind
    target = kind.create(text, TargetOptions(install, wal_dir=None, settings={}, ...))
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from howfast.errors import UsageError

if TYPE_CHECKING:
    from howfast.machine.pgbin import PgInstall
    from howfast.targets.base import Target
    from howfast.targets.k8s.spec import K8sOptions


@dataclass(frozen=True)
class TargetOptions:
    """The `howfast run` options a target may use; each kind refuses the ones it cannot."""

    install: PgInstall
    wal_dir: Path | None = None
    settings: dict[str, str] = field(default_factory=dict)
    keep: bool = False
    overwrite: bool = False
    checksums: bool = False
    memory_limit: int | None = None
    kubernetes: K8sOptions | None = None  # --namespace, --kube-context, ... (k8s:// only)


class TargetKind(ABC):
    name: str  # the `kind` of the targets it makes: local, dsn, k8s
    order: int = 100  # tried in this order; the first that matches makes the target
    usage: str = ""  # how to write one, for the message about a text no kind matches

    @abstractmethod
    def matches(self, text: str) -> bool:
        """Whether `text` (a --target argument) names a target of this kind."""

    @abstractmethod
    def create(self, text: str, options: TargetOptions) -> Target:
        """The target; UsageError when an option does not apply to this kind."""


@functools.cache
def kinds() -> tuple[TargetKind, ...]:
    """Every target kind, in their order."""
    import howfast.targets.kinds as package

    found: dict[str, TargetKind] = {}
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        kind = getattr(importlib.import_module(info.name), "KIND", None)
        if not isinstance(kind, TargetKind):
            continue
        if kind.name in found:
            raise RuntimeError(f"target kind {kind.name!r} is defined twice ({info.name})")
        found[kind.name] = kind
    return tuple(sorted(found.values(), key=lambda k: (k.order, k.name)))


def kind_for(text: str) -> TargetKind:
    """The kind of target `text` names; UsageError when none recognises it."""
    for kind in kinds():
        if kind.matches(text):
            return kind
    # The most general kind (the fallback, tried last) first: "a directory or a ... URI".
    usages = " or ".join(k.usage for k in reversed(kinds()) if k.usage)
    raise UsageError(f"unknown target {text!r}: give {usages}")
