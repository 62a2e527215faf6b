"""`--target DIR`: a throwaway cluster that howfast creates in a directory it owns."""

from __future__ import annotations

from pathlib import Path

from howfast.targets.base import Target
from howfast.targets.kind import TargetKind, TargetOptions


class DirectoryKind(TargetKind):
    name = "local"
    order = 1000  # the fallback: any text that is not a URI
    usage = "a directory"

    def matches(self, text: str) -> bool:
        return "://" not in text

    def create(self, text: str, options: TargetOptions) -> Target:
        from howfast.targets.local import LocalTarget

        return LocalTarget(
            Path(text).expanduser(),
            options.install,
            wal_dir=options.wal_dir,
            settings=options.settings,
            keep=options.keep,
            checksums=options.checksums,
            memory_limit=options.memory_limit,
        )


KIND = DirectoryKind()
