"""The capabilities a local target has, grouped by the part that provides them: each mixin
declares the capability Protocols it implements (mypy checks the signatures) and answers
from the parts. A new capability is one method here, on the part that has it."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from howfast.errors import HowfastError
from howfast.machine.cgroup import MemoryCgroup
from howfast.machine.serverio import ServerIo
from howfast.model import JSONValue
from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.capabilities import (
    AppliesStepSettings,
    Crashable,
    HasCurrentPrimary,
    HasLocalServer,
    HasLocalStandbys,
    HasServerIdentity,
    HasServerLog,
    HasStandbys,
    IoCappable,
    Partitionable,
    Promotable,
    Restartable,
    ServerIdentity,
    StandbyMember,
)
from howfast.targets.leftovers.killed import free_killed_memory
from howfast.targets.local.cgroups import ServerCgroups
from howfast.targets.local.client import ClientAccess
from howfast.targets.local.server import START_TIMEOUT_S, PrimaryServer
from howfast.targets.local.standbys import LocalStandbys
from howfast.targets.local.takeover import Takeover
from howfast.targets.replicas.local import LocalStandby


class ServerFacet(
    HasServerLog,
    HasLocalServer,
    Restartable,
    Crashable,
    HasServerIdentity,
    AppliesStepSettings,
    IoCappable,
):
    """What the server part (and, after a failover, the promoted standby) answers."""

    server: PrimaryServer
    cgroups: ServerCgroups
    takeover: Takeover
    standby_set: LocalStandbys | None
    step_settings: dict[str, str]  # ALTER SYSTEM overrides now in force

    def alive(self) -> bool:
        return self.takeover.primary_pid() is not None

    def server_log_tail(self, lines: int = 20) -> str | None:
        if self.takeover.serving is not None:
            return self.takeover.serving.log_tail(lines)
        return self.server.log_tail(lines)

    def server_log_file(self) -> Path | None:
        serving = self.takeover.serving
        return serving.log if serving is not None else self.server.server_log

    def memory_cgroup(self) -> MemoryCgroup | None:
        # the promoted standby runs in no memory cgroup (docs/events.md)
        return self.cgroups.cgroup if self.takeover.serving is None else None

    def server_io(self) -> ServerIo | None:
        if self.takeover.serving is not None:
            return self.takeover.serving.server_io()
        if self.server.postmaster is None:
            return None
        cgroups = self.cgroups
        return ServerIo(cgroups.io_account, self.takeover.primary_pid, cgroups.io_account_note)

    def server_identity(self) -> ServerIdentity:
        """The postmaster's pid (held here) and its start time (asked over SQL: None when
        the server does not answer)."""
        started = None
        if self.server.connection is not None and self.alive():
            with contextlib.suppress(HowfastError):
                started = pgquery.postmaster_start_time(self.server.connection)
        return ServerIdentity(pid=self.takeover.primary_pid(), started_at=started)

    def apply_step_settings(self, settings: Mapping[str, str]) -> None:
        """ALTER SYSTEM over the plan's postgresql.conf, then a reload, or a restart when a
        setting only takes effect at server start (shared_buffers...)."""
        if settings == self.step_settings:
            return
        assert self.server.connection is not None
        in_force, self.step_settings = self.step_settings, {}  # the plan's, if refused
        self.step_settings = pgquery.apply_step_settings(
            self.server.connection, dict(settings), in_force, self.restart
        )

    def restart(self) -> Mapping[str, JSONValue]:
        """Fast shutdown (a clean checkpoint) and start again, in the same cgroup; with
        standbys, back once they stream again (their walreceivers retry every 5 s): how
        long that took after the server accepted connections is `standbys_streaming_s`."""
        self.takeover.refuse_after_failover("restart")
        self.takeover.refuse_on_promoted("restart")
        self.server.stop_postmaster(signal.SIGINT)
        self.server.start_postmaster()
        started = time.monotonic()
        if self.standby_set is None:
            return {}
        return self.standby_set.wait_streaming(START_TIMEOUT_S, started)

    def crash(self) -> Mapping[str, JSONValue]:
        """SIGKILL of the postmaster (no shutdown, no checkpoint), wait until every process
        in the data directory is gone (SIGKILL to the ones that linger), start: the server
        replays its WAL (crash recovery). Same cgroups, same port. With standbys, back once
        they stream again, as after a restart: a failover after it promotes a standby that
        streams, not one still waiting to reconnect (its walreceiver retries every 5 s)."""
        self.takeover.refuse_after_failover("crash")
        self.takeover.refuse_on_promoted("crash")
        killed = self.takeover.primary_pid()
        began = time.monotonic()
        self.server.stop_postmaster(signal.SIGKILL)
        gone = time.monotonic()
        # The new postmaster frees the killed one's shared memory only where it looks first
        # (its data directory's key): what howfast recorded of it goes now, all its
        # processes gone, before the new one starts (leftovers/killed.py's checks).
        left = free_killed_memory(self.server.dirs.data_dir)
        freed = time.monotonic()
        self.server.start_postmaster()
        started = time.monotonic()
        facts: dict[str, JSONValue] = {
            "killed_pid": killed,
            "processes_gone_s": round(gone - began, 3),
            "started_s": round(started - freed, 3),
        }
        if left is not None:
            facts["shared_memory_left"] = left
        if self.standby_set is not None:
            facts.update(self.standby_set.wait_streaming(START_TIMEOUT_S, started))
        return facts

    def cap_iops(self, iops: int | None) -> Mapping[str, JSONValue]:
        """Cap (or, None, lift) the read and write IOPS of the cgroup the server's own I/O is
        counted in, on the data's and WAL's disks; lifting restores the rules from before."""
        self.takeover.refuse_on_promoted("cap the IOPS of")
        return self.cgroups.cap_iops(iops, self.server.dirs.disks)

    def server_iops_since(self, t: float) -> float | None:
        return self.cgroups.iops_since(t)


class StandbyFacet(HasStandbys, HasLocalStandbys, HasCurrentPrimary, Promotable, Partitionable):
    """What the standbys part and the failover part answer."""

    server: PrimaryServer
    client_access: ClientAccess
    takeover: Takeover
    standby_set: LocalStandbys | None

    def standbys(self) -> Sequence[StandbyMember]:
        return self.standby_set.members() if self.standby_set is not None else []

    def standby_storage_paths(self) -> dict[str, Path]:
        return self.standby_set.storage_paths() if self.standby_set is not None else {}

    def promotable_standbys(self) -> tuple[str, ...]:
        return self.standby_set.spec.names if self.standby_set is not None else ()

    def failover_refusal(self) -> str | None:
        if self.client_access.mode != "socket":
            # the load follows the promoted standby through the servers' sockets
            return "failover with --client tcp is not available yet: give --client socket"
        return None

    def connection_now(self) -> Connection:
        assert self.server.connection is not None
        return self.server.connection

    def client_connection_now(self, follow: bool = False) -> Connection:
        return self.takeover.client_connection(follow)

    def fail_over(
        self, standby: str, at_stop: Callable[[], None] | None = None
    ) -> Mapping[str, JSONValue]:
        return self.takeover.fail_over(standby, at_stop)

    def restore_design(self) -> Mapping[str, JSONValue] | None:
        return self.takeover.restore_design()

    def partitionable_standbys(self) -> tuple[str, ...]:
        return self.promotable_standbys()

    def replication_cut(self, standby: str) -> tuple[str, int] | None:
        found = self.standby_set.replication_link(standby) if self.standby_set else None
        if found is None or self.server.connection is None:
            return None
        return found, self.server.connection.port

    def standby_connection(self, standby: str) -> Connection | None:
        for member in self.standbys():
            if member.name == standby and isinstance(member, LocalStandby):
                return member.connection
        return None
