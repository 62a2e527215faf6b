"""What the pod actions (delete-pod, move) share: the server's pod before and after, and the
data that must have followed it (the pgbench tables' rows, counted over howfast's own SQL)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from howfast.errors import Aborted, HowfastError
from howfast.events.base import Applied, EventContext, Verified
from howfast.model import JSONValue
from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.capabilities import PodRecreatable, ServerIdentity

# pgbench's smallest table: as many rows as the scale; a missing volume has none
DATA_TABLE = "pgbench_branches"


def rows(conn: Connection) -> int | None:
    """The rows of pgbench_branches; None when there is no such table (nothing loaded)."""
    if DATA_TABLE not in pgquery.existing_pgbench_tables(conn):
        return None
    with pgquery.connect(conn, timeout_s=10) as db:
        row = db.execute(f"SELECT count(*) FROM {DATA_TABLE}").fetchone()
    return int(str(row[0])) if row else None


@dataclass(frozen=True)
class Before:
    identity: ServerIdentity
    rows: int | None


def recreate(ctx: EventContext, node: str | None) -> Mapping[str, JSONValue]:
    """The target's pod made again; Ctrl-C while it is (the run's cancel token) ends the
    action with an error, in the schedule's thread, as any failed action does."""
    target = ctx.target
    assert isinstance(target, PodRecreatable)
    try:
        return target.recreate_pod(node, ctx.cancel)
    except Aborted as exc:
        raise HowfastError(f"stopped while the pod was being made again: {exc}") from None


def before(ctx: EventContext) -> Before:
    target = ctx.target
    assert isinstance(target, PodRecreatable)
    return Before(target.pod_identity(), rows(ctx.primary()))


def verify_recreated(ctx: EventContext, applied: Applied) -> tuple[Verified, ServerIdentity]:
    """A new pod (another uid) with a new server (a later start time) holds the rows the old
    one had."""
    target = ctx.target
    assert isinstance(target, PodRecreatable)
    was = applied.before.get("pod")
    assert isinstance(was, Before)
    now = target.pod_identity()
    try:
        after_rows: int | None = rows(ctx.primary())
    except HowfastError as exc:
        after_rows = None
        problem: str | None = f"the data could not be read after the event: {exc}"
    else:
        problem = None
    evidence: dict[str, JSONValue] = {
        "pod_uid_before": was.identity.pod_uid,
        "pod_uid_after": now.pod_uid,
        "node_before": was.identity.node,
        "node_after": now.node,
        "started_at_before": was.identity.started_at,
        "started_at_after": now.started_at,
        f"{DATA_TABLE}_rows_before": was.rows,
        f"{DATA_TABLE}_rows_after": after_rows,
    }
    if problem is None and (now.pod_uid is None or now.pod_uid == was.identity.pod_uid):
        problem = f"the same pod runs after the event (uid {now.pod_uid})"
    if problem is None and (now.started_at is None or now.started_at == was.identity.started_at):
        problem = f"the server was not started again (started at {now.started_at})"
    if problem is None and was.rows is not None and after_rows != was.rows:
        problem = (
            f"the data did not follow the pod: {DATA_TABLE} had {was.rows} rows, now {after_rows}"
        )
    if was.rows is None:
        evidence["data"] = f"no {DATA_TABLE} table before the event: the data was not compared"
    return Verified(problem is None, evidence, problem), now
