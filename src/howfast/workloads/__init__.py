"""Workloads by name. A new tool is a new module registered here."""

from __future__ import annotations

from howfast.workloads.base import Workload


def get_workload(name: str) -> Workload:
    from howfast.workloads.fio.workload import FioWorkload
    from howfast.workloads.fsync_probe import PgTestFsyncWorkload
    from howfast.workloads.pgbench.workload import PgbenchInitWorkload, PgbenchWorkload
    from howfast.workloads.seqread import SeqreadWorkload

    registry: dict[str, Workload] = {
        "pgbench": PgbenchWorkload(),
        "pgbench-init": PgbenchInitWorkload(),
        "fio": FioWorkload(),
        "pg_test_fsync": PgTestFsyncWorkload(),
        "seqread": SeqreadWorkload(),
    }
    try:
        return registry[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r}; known: {', '.join(registry)}") from None
