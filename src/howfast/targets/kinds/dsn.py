"""`--target postgresql://...` or `--target "host=db dbname=bench"`: an existing server,
reached by a libpq URI or key=value connection string."""

from __future__ import annotations

import functools
import re

from howfast.design import DesignOptions
from howfast.errors import UsageError
from howfast.redact import redact_dsn
from howfast.targets.base import Target
from howfast.targets.kind import TargetKind, TargetOptions

SCHEMES = ("postgresql://", "postgres://")
_FIRST_KEY = re.compile(r"\s*([A-Za-z_]+)\s*=")


@functools.cache
def libpq_keywords() -> frozenset[str]:
    """Every connection keyword this libpq knows (host, port, dbname, sslmode...)."""
    from psycopg import pq

    return frozenset(o.keyword.decode() for o in pq.Conninfo.get_defaults())


def is_conninfo(text: str) -> bool:
    """Whether `text` is a key=value connection string: it starts with a libpq keyword and
    `=` (a directory of that name must be written `./host=...`)."""
    match = _FIRST_KEY.match(text)
    return match is not None and match[1].lower() in libpq_keywords()


class DsnKind(TargetKind):
    name = "dsn"
    order = 10
    usage = "a postgresql:// URI (or key=value connection string)"
    local_install = "client"  # pgbench and psql run here; the server is elsewhere

    def matches(self, text: str) -> bool:
        return text.startswith(SCHEMES) or is_conninfo(text)

    def refuse_design(self, text: str, design: DesignOptions) -> None:
        if design.replicas:
            raise UsageError(
                f"{redact_dsn(text)}: howfast does not add standbys to a server it did not create",
                "to measure an existing primary with its standbys, run without --replicas: "
                "the standbys it streams to are found in pg_stat_replication, and a synchronous "
                "one's waits (IPC:SyncRep) in wait_syncrep_share",
            )
        if design.client is not None:
            raise UsageError(
                f"{redact_dsn(text)}: --client places the client of a server howfast creates",
                "the client of an existing server is this machine, connecting as the URI says "
                "(host=127.0.0.1 for TCP, a socket directory for a socket)",
            )
        super().refuse_design(text, design)

    def create(self, text: str, options: TargetOptions) -> list[Target]:
        from howfast.targets.dsn import DsnTarget

        if options.wal_dir is not None:
            raise UsageError("--wal-dir applies to directory targets only, not to a server URI")
        if options.memory_limit is not None:
            raise UsageError(
                "--memory applies to directory targets only: howfast cannot cap the memory "
                "of an existing server (postgresql://...)",
                "drop --memory, or give --dataset SIZE to size the data for that server",
            )
        return [DsnTarget(text, install=options.install, overwrite=options.overwrite)]


KIND = DsnKind()
