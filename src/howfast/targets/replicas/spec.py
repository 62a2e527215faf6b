"""The replication design of one primary: how many standbys, which synchronous-commit level."""

from __future__ import annotations

from dataclasses import dataclass

from howfast.design import SyncLevel


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
