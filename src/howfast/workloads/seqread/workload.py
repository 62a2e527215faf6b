"""seqread: the time to read a large table in full, from a cold cache ("large read time").

The largest pgbench table (pgbench_accounts; a partitioned one as the sum of its partitions)
is read by `SELECT count(*)` with a sequential scan forced: index, index-only and bitmap scans
off, and parallel workers off unless `parallel` (what was used is recorded).

A cold read first restarts the server, so that shared_buffers start empty, and drops the OS
page cache when the host permits it (root on this machine); otherwise a `--memory` cap smaller
than the table keeps the read cold. Whether it really was cold is measured, not assumed: the
bytes the data device read during the query (the host's disk counters) against the table's
size. When the server's own I/O cgroup counts (a server howfast started here), the server's
own reads from that device are what is compared: the whole device's counters also carry what
anything else on the machine read meanwhile, which once made a warm read look cold. An
existing server can be neither restarted nor have its cache dropped, and its device is not
visible, so its reads are timed without that verdict.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql

from howfast.diskcounters import SECTOR
from howfast.errors import HowfastError
from howfast.hosts.base import Host
from howfast.machine.serverio import IoAccount, device_numbers
from howfast.model import JSONValue
from howfast.targets import pgquery
from howfast.targets.base import Target
from howfast.targets.capabilities import HasLocalServer, HasStorage, Restartable, cannot_restart
from howfast.units import human_bytes
from howfast.workloads.base import (
    OutcomeDraft,
    PlanContext,
    PlannedInvocation,
    StepContext,
    StepOutcome,
    Workload,
)
from howfast.workloads.seqread import plan as seqread_plan

COLD_SHARE = 0.8  # cold when the device read at least this share of the table

# Each pgbench table and, for a partition, its parent; sizes of the main fork (what a scan reads).
_TABLES_SQL = """
SELECT c.relname, p.relname, pg_relation_size(c.oid)
  FROM pg_class c
  LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
  LEFT JOIN pg_class p ON p.oid = i.inhparent
 WHERE c.relkind = 'r' AND c.relname ~ '^pgbench_' AND pg_table_is_visible(c.oid)
"""


def largest_table(rows: Sequence[tuple[str, str | None, int]]) -> tuple[str, int] | None:
    """(table, bytes) of the largest table; partitions count towards their parent."""
    sizes: dict[str, int] = {}
    for name, parent, size in rows:
        key = parent or name
        sizes[key] = sizes.get(key, 0) + int(size)
    if not sizes:
        return None
    name = max(sizes, key=lambda n: (sizes[n], n))
    return name, sizes[name]


def scan_settings(parallel: bool) -> dict[str, str]:
    """Session settings that leave the planner only a sequential scan."""
    settings = {
        "enable_indexscan": "off",
        "enable_indexonlyscan": "off",
        "enable_bitmapscan": "off",
        "enable_seqscan": "on",
    }
    if not parallel:
        settings["max_parallel_workers_per_gather"] = "0"
    return settings


def scan_nodes(plan: Mapping[str, Any]) -> list[str]:
    """Node types of an EXPLAIN (FORMAT JSON) plan that read a relation."""
    found = [str(plan["Node Type"])] if "Relation Name" in plan else []
    for child in plan.get("Plans") or []:
        found += scan_nodes(child)
    return found


def cold_verdict(table_bytes: int, device_bytes: int | None) -> bool | None:
    if device_bytes is None or table_bytes <= 0:
        return None
    return device_bytes >= COLD_SHARE * table_bytes


def read_metrics(
    table_bytes: int,
    seconds: float,
    device_bytes: int | None,
    rows: int,
    server_bytes: int | None = None,
) -> dict[str, JSONValue]:
    """The read's figures; the verdict from the server's own reads when they were counted,
    else from the whole device's."""
    basis, read = verdict_reads(device_bytes, server_bytes)
    return {
        "seqread_s": round(seconds, 4),
        "seqread_mbps": round(table_bytes / 1e6 / seconds, 2) if seconds > 0 else None,
        "table_bytes": table_bytes,
        "rows": rows,
        "device_read_bytes": device_bytes,
        "server_read_bytes": server_bytes,
        "cache_cold": cold_verdict(table_bytes, read),
        "cache_cold_basis": basis,
    }


def verdict_reads(
    device_bytes: int | None, server_bytes: int | None
) -> tuple[str | None, int | None]:
    """(whose reads decide whether the read was cold, how many bytes they read)."""
    if server_bytes is not None:
        return "server", server_bytes
    return ("device", device_bytes) if device_bytes is not None else (None, None)


def data_device(target: Target, host: Host) -> str | None:
    """The block device behind the target's data directory, as the host's counters name it."""
    paths = target.storage_paths() if isinstance(target, HasStorage) else {}
    if "data" not in paths:
        return None
    return next((r.device for r in host.role_devices(paths) if r.role == "data"), None)


def sectors_read(host: Host, device: str | None) -> int | None:
    return host.device_sectors_read(device) if device is not None else None


def server_account(target: Target, device: str | None) -> tuple[IoAccount, str] | None:
    """The server's own I/O cgroup and the data device's MAJ:MIN in it, when it counts."""
    source = target.server_io() if isinstance(target, HasLocalServer) else None
    account = source.account if source is not None else None
    number = device_numbers(device) if device is not None else None
    if account is None or not account.counting or number is None:
        return None
    return account, number


def server_bytes_read(found: tuple[IoAccount, str] | None) -> int | None:
    if found is None:
        return None
    account, number = found
    try:
        return int(account.read().get(number, {}).get("read_bytes", 0))
    except OSError:
        return None


class SeqreadWorkload(Workload):
    name = "seqread"

    def label(self, params: dict[str, JSONValue]) -> str:
        return seqread_plan.PLUGIN.label(params)

    def prepare(self, ctx: StepContext, params: dict[str, JSONValue]) -> StepOutcome:
        """A cold start before the samplers run: restart, then drop the page cache."""
        out = OutcomeDraft()
        if not params.get("cold", True):
            out.resolved_params["cache_reset"] = "none"
            return out.freeze()
        target = ctx.target
        if not isinstance(target, HasStorage) or not target.storage_paths():
            out.warnings.append(
                "an existing server cannot be restarted nor its page cache dropped by "
                "howfast: the table may be read from memory, and with its device out of "
                "sight whether it was cannot be told (cache_cold is null)"
            )
            out.resolved_params["cache_reset"] = "none"
            return out.freeze()
        done = []
        if isinstance(target, Restartable):
            target.restart()
            done.append("restart")
        else:
            out.warnings.append(f"the server was not restarted: {cannot_restart(target)}")
        why_not = ctx.host.drop_caches()
        group = target.memory_cgroup() if isinstance(target, HasLocalServer) else None
        if why_not is None:
            done.append("drop_caches")
        elif group is not None:
            done.append("memory cap")  # pages beyond the cap are evicted as the scan goes
        else:
            out.warnings.append(
                f"the OS page cache was not dropped ({why_not}): the table may be read "
                "partly from memory; cache_cold says whether it was"
            )
        out.resolved_params["cache_reset"] = ", ".join(done) or "none"
        return out.freeze()

    def planned(self, ctx: PlanContext, params: dict[str, JSONValue]) -> list[PlannedInvocation]:
        how = "after a server restart and a dropped page cache" if params.get("cold", True) else ""
        return [
            PlannedInvocation(
                None,
                "SQL over the connection, no external tool: SELECT count(*) FROM the largest "
                f"pgbench table, sequential scan forced {how}".rstrip(),
            )
        ]

    def execute(self, ctx: StepContext, params: dict[str, JSONValue]) -> StepOutcome:
        parallel = bool(params.get("parallel", False))
        device = data_device(ctx.target, ctx.host)
        with pgquery.connect(ctx.server()) as db:
            rows = [(str(a), str(b) if b else None, int(str(c))) for a, b, c in _fetch(db)]
            found = largest_table(rows)
            if found is None:
                raise HowfastError(
                    "seqread found no pgbench table to read",
                    "load one first with a pgbench-init step",
                )
            table, table_bytes = found
            for name, value in scan_settings(parallel).items():
                db.execute(sql.SQL("SET {} = {}").format(sql.Identifier(name), sql.Literal(value)))
            query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
            nodes = _explain(db, query)
            workers = db.execute("SHOW max_parallel_workers_per_gather").fetchone()
            own = server_account(ctx.target, device)
            before, own_before = sectors_read(ctx.host, device), server_bytes_read(own)
            started = time.perf_counter()
            with _cancel_on_interrupt(db):
                count = db.execute(query).fetchone()
            seconds = time.perf_counter() - started
            after, own_after = sectors_read(ctx.host, device), server_bytes_read(own)
        if count is None:
            raise HowfastError(f"SELECT count(*) FROM {table} returned nothing")
        device_bytes = (
            max(0, after - before) * SECTOR if before is not None and after is not None else None
        )
        server_bytes = (
            max(0, own_after - own_before)
            if own_before is not None and own_after is not None
            else None
        )
        rows_read = int(str(count[0]))
        out = OutcomeDraft(
            metrics=read_metrics(table_bytes, seconds, device_bytes, rows_read, server_bytes),
            resolved_params={
                "table": table,
                "scan": ", ".join(sorted(set(nodes))),
                "parallel_workers": int(str(workers[0])) if workers else None,
            },
        )
        if any("Seq Scan" not in n for n in nodes):
            out.warnings.append(f"the planner did not read {table} sequentially: {nodes}")
        if params.get("cold", True) and out.metrics["cache_cold"] is False:
            who, read = verdict_reads(device_bytes, server_bytes)
            out.warnings.append(
                f"not a cold read: the {who} read {human_bytes(read or 0)} of the "
                f"{human_bytes(table_bytes)} table from the device; the rest came from memory, "
                "so seqread_s is faster than the storage"
            )
        return out.freeze()


def _fetch(db: psycopg.Connection[tuple[object, ...]]) -> list[tuple[Any, ...]]:
    return list(db.execute(_TABLES_SQL).fetchall())


def _explain(db: psycopg.Connection[tuple[object, ...]], query: sql.Composed) -> list[str]:
    row = db.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + query).fetchone()
    document = row[0] if row else None
    if not isinstance(document, list) or not document:
        return []
    return scan_nodes(document[0].get("Plan") or {})


@contextlib.contextmanager
def _cancel_on_interrupt(db: psycopg.Connection[tuple[object, ...]]) -> Iterator[None]:
    """On Ctrl-C, stop the server reading too: it would go on to the end of the table."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            db.cancel()
        raise
