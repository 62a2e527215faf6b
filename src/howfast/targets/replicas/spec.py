"""The replication design of one primary: how many standbys, which synchronous-commit level."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from howfast.design import DesignOptions, SyncLevel
from howfast.errors import UsageError


def standby_names(count: int) -> tuple[str, ...]:
    """standby_1, standby_2 ...: each one's application_name and replication slot."""
    return tuple(f"standby_{i}" for i in range(1, count + 1))


@dataclass(frozen=True)
class ReplicaSpec:
    count: int  # >= 1
    sync: SyncLevel

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError("a ReplicaSpec has at least one standby")

    @property
    def names(self) -> tuple[str, ...]:
        return standby_names(self.count)

    @property
    def synchronous_standby_names(self) -> str:
        """'' for off (asynchronous standbys); else FIRST N: a commit waits for all N."""
        if self.sync == "off":
            return ""
        return f"FIRST {self.count} ({', '.join(self.names)})"

    @property
    def synchronous_commit(self) -> str:
        """'off' means asynchronous standbys, not synchronous_commit=off: the primary still
        flushes its WAL at each commit (PostgreSQL's default, on)."""
        return "on" if self.sync == "off" else self.sync

    @property
    def expected_sync_state(self) -> str:
        """pg_stat_replication.sync_state once the settings are in force."""
        return "async" if self.sync == "off" else "sync"

    def describe(self) -> str:
        """'1 sync standby (on)', '2 async standbys'"""
        plural = "s" if self.count > 1 else ""
        if self.sync == "off":
            return f"{self.count} async standby{plural}"
        return f"{self.count} sync standby{plural} ({self.sync})"


NEEDS_STANDBYS = "give --replicas N (N >= 1) or ?replicas=N"
SET_BY_HOWFAST = ("synchronous_standby_names", "synchronous_commit")


def replica_spec(design: DesignOptions, settings: Mapping[str, str]) -> ReplicaSpec | None:
    """The standbys a design asks for (None: none), after the checks every kind shares;
    UsageError for what cannot be honoured. `settings`: the server settings the run sets
    (the plan's and --set), which must leave the replication settings to howfast."""
    count = design.replicas or 0
    if count == 0:
        for key, flag in (("sync", "--sync"), ("standby_dir", "--standby-dir")):
            if key in design.given():
                raise UsageError(f"{flag} needs standbys: {NEEDS_STANDBYS}")
        if design.standby_latency_ms is not None:
            raise UsageError(f"--standby-latency needs standbys: {NEEDS_STANDBYS}")
        return None
    spec = ReplicaSpec(count, design.sync or "on")
    if "synchronous_commit" in settings:
        raise UsageError(
            f"--sync {spec.sync} sets synchronous_commit: drop one of them",
            "with standbys, --sync (default on) is the commit level; --sync off makes them "
            "asynchronous",
        )
    if "synchronous_standby_names" in settings:
        raise UsageError("howfast sets synchronous_standby_names from --replicas/--sync")
    dirs = len(design.standby_dirs)
    if dirs > 1 and dirs != count:
        raise UsageError(f"give one --standby-dir, or one per standby ({count}), not {dirs}")
    return spec
