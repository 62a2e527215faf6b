"""The failover part of a local target (issue 29: targets/replicas/failover.py): the primary
killed as a failed node and a standby promoted, then, between steps, the design restored
from the promoted server. Which server is the primary now is known here."""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from howfast.errors import HowfastError
from howfast.model import JSONValue
from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.local.server import START_TIMEOUT_S, PrimaryServer
from howfast.targets.local.standbys import LocalStandbys
from howfast.targets.local_server import conf_line
from howfast.targets.replicas import failover
from howfast.targets.replicas.local import LocalStandby


class Takeover:
    def __init__(self, server: PrimaryServer, standbys: LocalStandbys | None) -> None:
        self.server = server
        self.standbys = standbys
        self.promoted: str | None = None  # the standby a failover made the primary
        # Once the design is rebuilt after a failover: the former standby that is the primary
        # now (the original primary's server is gone, its data directory removed)
        self.serving: LocalStandby | None = None
        self.rebuilds = 0  # how many times the design was rebuilt (the new standbys' names)
        # The latency the primary's storage adds (an emulated target's, else 0): a promoted
        # standby's own volume takes it, so that the primary and the standby keep the
        # latencies the design gave them (its new standby's volume has the standby's).
        self.primary_latency_ms = 0.0

    def _members(self) -> list[LocalStandby]:
        replica_set = self.standbys.replica_set if self.standbys is not None else None
        members = replica_set.members if replica_set is not None else []
        return [m for m in members if isinstance(m, LocalStandby)]

    def primary_pid(self) -> int | None:
        proc = self.serving.postmaster if self.serving is not None else self.server.postmaster
        return proc.pid if proc is not None and proc.poll() is None else None

    def primary_data_dir(self) -> Path:
        return self.serving.data_dir if self.serving is not None else self.server.dirs.data_dir

    def client_connection(self, follow: bool) -> Connection:
        """With `follow`, the standbys' sockets after the primary's: libpq takes the first
        that accepts writes, the promoted standby after a failover."""
        assert self.server.connection is not None
        conn = self.server.connection
        if not follow or self.standbys is None or self.standbys.replica_set is None:
            return conn
        others = tuple(
            (str(m.run_dir), m.port) for m in self._members() if m.connection is not None
        )
        return dataclasses.replace(conn, alternates=others)

    def put_in_force(self, settings: Mapping[str, str]) -> None:
        """Replication settings in postgresql.conf, then a reload: a step's ALTER SYSTEM
        settings (reset between steps) cannot undo them."""
        assert self.server.connection is not None
        with (self.primary_data_dir() / "postgresql.conf").open("a") as conf:
            conf.write("# the replication design, set by howfast once the standbys stream\n")
            for name, value in settings.items():
                conf.write(conf_line(name, value))
        pgquery.reload_and_wait(self.server.connection)

    def fail_over(
        self, standby: str, at_stop: Callable[[], None] | None = None
    ) -> Mapping[str, JSONValue]:
        """The primary killed as a failed node, `standby` promoted; howfast's connection is
        the new primary's from then on. Only with a single standby: no other to re-point.
        `at_stop` runs once the primary's processes are stopped, before they are killed
        (failover.kill_all: the node's network cut)."""
        self.refuse_after_failover("fail over")
        member = next((m for m in self._members() if m.name == standby), None)
        primary = self.serving.postmaster if self.serving is not None else self.server.postmaster
        if member is None or primary is None:
            raise HowfastError(f"no standby {standby} to promote")
        killed = self.primary_pid()
        began = time.monotonic()
        failover.kill_all(primary, self.primary_data_dir(), at_stop)
        gone = time.monotonic()
        drained = failover.wait_received(member)
        self.server.connection = failover.promote(member)
        self.promoted = member.name
        return {
            "killed_pid": killed,
            "promoted": member.name,
            "promoted_pid": member.postmaster.pid if member.postmaster else None,
            "processes_gone_s": round(gone - began, 3),
            "standby_read_rest_s": drained,
            "promoted_s": round(time.monotonic() - gone, 3),
        }

    def refuse_after_failover(self, what: str) -> None:
        """The old primary is never started again (no split brain)."""
        if self.promoted is not None:
            raise HowfastError(
                f"cannot {what} the server: a failover promoted {self.promoted}, and the old "
                "primary is never started again"
            )

    def refuse_on_promoted(self, what: str) -> None:
        """After a rebuild the primary is a promoted standby: howfast does not restart it."""
        if self.serving is not None:
            raise HowfastError(
                f"cannot {what} the server: since a failover the primary is the promoted "
                f"{self.serving.name}, and restarting a promoted standby is not available yet"
            )

    def restore_design(self) -> Mapping[str, JSONValue] | None:
        """Between steps, after a failover: the killed primary's shared memory freed and its
        data directory removed, then the lost standby made again from the promoted server (a
        base backup, as at start, where the design puts a standby), streaming, caught up and
        in the sync state asked. The facts of it, for the later steps; None when there was
        no failover. A HowfastError (the later steps are skipped with it) when it fails."""
        if self.promoted is None:
            return None
        promoted = next((m for m in self._members() if m.name == self.promoted), None)
        if promoted is None or promoted.connection is None:
            raise HowfastError(f"the promoted {self.promoted} is not a standby of this target")
        standbys = self.standbys
        assert standbys is not None and standbys.replica_set is not None
        assert self.server.user is not None and self.server.dirs.run_dir is not None
        if not promoted.alive():
            raise HowfastError(f"the promoted {promoted.name} is not running any more")
        began = time.monotonic()
        removed, memory_left = self._remove_killed_primary()
        self.serving = promoted  # stop() stops it from now on
        self.server.connection = promoted.connection
        latency = self._primary_latency_on(promoted)  # before the base backup reads it
        removed_s = time.monotonic() - began
        # promote() emptied synchronous_standby_names by ALTER SYSTEM, and its copied
        # standby block empties it too: both go, the design is written in postgresql.conf
        pgquery.alter_system(
            promoted.connection, {}, reset={"synchronous_standby_names", "synchronous_commit"}
        )
        self.rebuilds += 1
        index = standbys.spec.names.index(promoted.name)
        member = standbys.member(
            index, promoted.name, self.server.user, self.server.dirs.run_dir, self.rebuilds
        )
        parts = standbys.replica_set.rebuild(
            promoted.connection, promoted, member, timeout_s=START_TIMEOUT_S
        )
        self.promoted = None
        states = standbys.replica_set.sync_states()
        return {
            "primary": promoted.name,
            "primary_location": str(promoted.root),
            "primary_port": promoted.port,
            "standby": member.name,
            "standby_location": str(member.root),
            "standby_sync_state": states.get(member.name) or None,
            "old_primary_removed": removed,
            "seconds": round(time.monotonic() - began, 3),
            "old_primary_removed_s": round(removed_s, 3),
            **({"primary_added_latency_ms": latency} if latency is not None else {}),
            **parts,
            # not a reason to skip the later steps: howfast cleanup removes it
            **({"warnings": [memory_left]} if memory_left is not None else {}),
        }

    def _primary_latency_on(self, promoted: LocalStandby) -> float | None:
        """The promoted standby's own volume (--standby-latency) set to the primary's added
        latency; None when it has no volume of its own."""
        if promoted.storage is None:
            return None
        promoted.storage.set_latency(self.primary_latency_ms)
        return self.primary_latency_ms

    def _remove_killed_primary(self) -> tuple[str, str | None]:
        """The primary a failover killed: its shared memory freed (failover.tidy_killed), its
        data directory (and WAL) removed; only what howfast made. Returns the path removed,
        and a warning when some of its shared memory is left."""
        server, dirs = self.server, self.server.dirs
        assert server.user is not None and dirs.run_dir is not None
        old = self.serving
        if old is None:  # the original primary: its cluster directory holds the standbys
            log = server.server_log or dirs.run_dir / "server.log"
            left = failover.tidy_killed(
                server.install, server.user, dirs.data_dir, dirs.run_dir, log
            )
            server.postmaster = None  # gone and tidied: stop() has nothing to tidy
            if dirs.wal_cluster_dir is not None:
                shutil.rmtree(dirs.wal_cluster_dir / "pg_wal", ignore_errors=True)
            shutil.rmtree(dirs.data_dir, ignore_errors=True)
            return str(dirs.data_dir), left
        left = failover.tidy_killed(
            server.install, server.user, old.data_dir, dirs.run_dir, old.log
        )
        old.stop()  # its directory, cgroup and storage
        return str(old.root), left

    def stop_serving(self) -> None:
        """The promoted standby that became the primary at a rebuild; killed by a later
        failover, its shared memory is freed first. A HowfastError, once it is stopped, when
        some of that is left (the run's stop warns; `howfast cleanup` removes it)."""
        serving = self.serving
        if serving is None:
            return
        left = None
        if serving.postmaster is not None and serving.postmaster.poll() is not None:
            server = self.server
            assert server.user is not None and server.dirs.run_dir is not None
            left = failover.tidy_killed(
                server.install, server.user, serving.data_dir, server.dirs.run_dir, serving.log
            )
        serving.stop()
        self.serving = None
        if left is not None:
            raise HowfastError(left)
