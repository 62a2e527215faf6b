"""`--target postgresql://...`: an existing server, reached by a libpq URI."""

from __future__ import annotations

from howfast.errors import UsageError
from howfast.targets.base import Target
from howfast.targets.registry import TargetKind, TargetOptions

SCHEMES = ("postgresql://", "postgres://")


class DsnKind(TargetKind):
    name = "dsn"
    order = 10
    usage = "a postgresql:// URI"

    def matches(self, text: str) -> bool:
        return text.startswith(SCHEMES)

    def create(self, text: str, options: TargetOptions) -> Target:
        from howfast.targets.dsn import DsnTarget

        if options.wal_dir is not None:
            raise UsageError("--wal-dir applies to directory targets only, not to a server URI")
        if options.memory_limit is not None:
            raise UsageError(
                "--memory applies to directory targets only: howfast cannot cap the memory "
                "of an existing server (postgresql://...)",
                "drop --memory, or give --dataset SIZE to size the data for that server",
            )
        return DsnTarget(text, overwrite=options.overwrite)


KIND = DsnKind()
