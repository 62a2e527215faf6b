"""A primary's standbys, started and brought into the design asked: the same orchestration
for standbys on this machine and in pods. It speaks SQL to the primary only; each member
builds, starts and stops itself (capabilities.StandbyMember).

    replicas = ReplicaSet(spec, primary_connection, members)
    replicas.start(timeout_s=60)   # base backups, start, streaming and caught up, synchronous
    ...
    replicas.stop()                # newest first; every member tried, the first error raised
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from howfast.errors import HowfastError
from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.capabilities import StandbyMember
from howfast.targets.replicas.builders import STATE_QUERY
from howfast.targets.replicas.spec import ReplicaSpec
from howfast.targets.replicas.state import StandbyState, caught_up, describe_state, parse_state

POLL_S = 0.2
SYNC_TIMEOUT_S = 10.0
LOG_LINES = 10


def alter_system_in_force(primary: Connection, settings: Mapping[str, str]) -> None:
    """The default way to put replication settings in force: ALTER SYSTEM, then a reload."""
    pgquery.alter_system(primary, dict(settings), reset=set())
    pgquery.reload_and_wait(primary)


class ReplicaSet:
    def __init__(
        self,
        spec: ReplicaSpec,
        primary: Connection,
        members: Sequence[StandbyMember],
        *,
        put_in_force: Callable[[Mapping[str, str]], None] | None = None,
    ) -> None:
        self.spec = spec
        self.primary = primary
        self.members = list(members)
        # How synchronous_standby_names and synchronous_commit reach the primary: a local
        # target writes them in its postgresql.conf (ALTER SYSTEM values a step may reset)
        self.put_in_force = put_in_force or (lambda s: alter_system_in_force(primary, s))
        self.started: list[StandbyMember] = []

    def start(self, timeout_s: float) -> None:
        """Each standby by base backup, started; then streaming and caught up; then the
        synchronous-commit level in force. HowfastError naming the standby that failed."""
        for member in self.members:
            self.started.append(member)  # stop() removes what build() began
            member.build(self.primary)
            member.start()
        self.wait_streaming(timeout_s)
        self.make_synchronous()

    def rebuild(
        self, primary: Connection, lost: StandbyMember, member: StandbyMember, timeout_s: float
    ) -> dict[str, float]:
        """After a failover promoted `lost`: the set follows `primary` (the promoted server)
        and `member` takes `lost`'s place, built from it, started, then streaming, caught up
        and synchronous as at start. Returns how long each part took, in seconds."""
        self.primary = primary
        self.members = [member if m is lost else m for m in self.members]
        self.started = [m for m in self.started if m is not lost]
        self.started.append(member)  # stop() removes what build() began, also on Ctrl-C
        began = time.monotonic()
        member.build(primary)
        built = time.monotonic()
        member.start()
        started = time.monotonic()
        self.wait_streaming(timeout_s)
        streaming = time.monotonic()
        self.make_synchronous()
        return {
            "base_backup_s": round(built - began, 3),
            "started_s": round(started - built, 3),
            "caught_up_s": round(streaming - started, 3),
            "in_force_s": round(time.monotonic() - streaming, 3),
        }

    def states(self) -> dict[str, StandbyState]:
        with pgquery.connect(self.primary, timeout_s=5) as db:
            rows = db.execute(STATE_QUERY).fetchall()
        return parse_state(rows)

    def wait_streaming(self, timeout_s: float) -> None:
        """Until every standby streams and has replayed what the primary had written once
        all of them streamed."""
        import psycopg  # here, not at the top: a dry run never loads it

        deadline = time.monotonic() + timeout_s
        target: int | None = None
        states: dict[str, StandbyState] = {}
        while True:
            try:
                states = self.states()
            except (HowfastError, psycopg.Error) as exc:
                raise HowfastError(f"reading the primary's pg_stat_replication: {exc}") from None
            names = [m.name for m in self.members]
            if target is None and all(
                states.get(n) is not None and states[n].state == "streaming" for n in names
            ):
                target = max(s.current_lsn for s in states.values())
            if target is not None and all(
                n in states and caught_up(states[n], target) for n in names
            ):
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
        late = next(
            m
            for m in self.members
            if m.name not in states or target is None or not caught_up(states[m.name], target)
        )
        doing = "start streaming from" if target is None else "catch up with"
        tail = late.log_tail(LOG_LINES)
        raise HowfastError(
            f"{late.name} did not {doing} the primary within {timeout_s:g} s "
            f"({describe_state(late.name, states)}); its server log's last lines:\n"
            f"{tail or '(empty)'}"
        )

    def make_synchronous(self) -> None:
        """synchronous_standby_names and synchronous_commit of the design, then wait until
        pg_stat_replication shows every standby in the expected sync state."""
        self.put_in_force(
            {
                "synchronous_standby_names": self.spec.synchronous_standby_names,
                "synchronous_commit": self.spec.synchronous_commit,
            }
        )
        expected = self.spec.expected_sync_state
        deadline = time.monotonic() + SYNC_TIMEOUT_S
        states: dict[str, StandbyState] = {}
        while time.monotonic() < deadline:
            states = self.states()
            if all(
                m.name in states and states[m.name].sync_state == expected for m in self.members
            ):
                return
            time.sleep(POLL_S)
        seen = ", ".join(f"{m.name}: {describe_state(m.name, states)}" for m in self.members)
        raise HowfastError(
            f"the standbys did not become {expected} within {SYNC_TIMEOUT_S:g} s ({seen})"
        )

    def sync_states(self) -> dict[str, str]:
        """Each standby's sync_state now ('' when it is not connected); {} when the primary
        cannot be asked."""
        import psycopg

        try:
            states = self.states()
        except (HowfastError, psycopg.Error):
            return {}
        return {m.name: states[m.name].sync_state if m.name in states else "" for m in self.members}

    def stop(self) -> None:
        """Stop and remove every standby started, newest first; each is tried even when an
        earlier one failed, and the first failure is raised at the end."""
        first: BaseException | None = None
        while self.started:
            member = self.started.pop()
            try:
                member.stop()
            except Exception as exc:  # the others must still go
                first = first or exc
        if first is not None:
            raise first
