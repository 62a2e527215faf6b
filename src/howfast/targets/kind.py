"""What a target kind is (TargetKind) and the run options it may use (TargetOptions): the
interface each module of targets/kinds/ implements, apart from the registry that finds them
(targets/registry.py)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

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
