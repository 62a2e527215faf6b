"""The round trip from the client to the server, timed before each pgbench step: pgbench runs
a script of one trivial query, one client, a thousand times, with its per-transaction log, and
the log's latencies are the round trips (the query itself costs microseconds). Where the
client is decides what is timed: a Unix socket, TCP over 127.0.0.1, a pod network, another
node. The probe runs on the host and connection the load runs with, so it times the load's
own path. `client_rtt_p50_ms` and `client_rtt_p99_ms` are step metrics (measured, not
derived); analysis/client.py multiplies them by a transaction's round trips.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import PurePath

from howfast.hosts.base import Invocation
from howfast.targets.base import Connection
from howfast.workloads.pgbench import txlog

RTT_SCRIPT = "SELECT 1;\n"  # one round trip in every protocol mode
RTT_SCRIPT_FILE = "rtt.sql"
RTT_TRANSACTIONS = 1000  # ~0.06 s over a socket here; a pod's exec costs more than the probe
RTT_DIR = "rtt"
RTT_LOG_PREFIX = f"{RTT_DIR}/tx"
RTT_TIMEOUT_S = 120.0  # 120 ms per round trip would be a network no benchmark runs over


def rtt_argv(pgbench: str | PurePath, conn_args: list[str]) -> list[str]:
    """`-n`: no vacuum of pgbench's tables (the probe touches none; they may not exist)."""
    return [
        str(pgbench), "-n", "-c", "1", "-j", "1", "-t", str(RTT_TRANSACTIONS),
        "-f", RTT_SCRIPT_FILE, "-l", f"--log-prefix={RTT_LOG_PREFIX}", *conn_args,
    ]  # fmt: skip


def rtt_invocation(pgbench: str | PurePath, conn: Connection) -> Invocation:
    """The probe as it runs (and as --dry-run prints it): the password in the secret
    environment only, the script and the log in the work directory."""
    return Invocation(
        tuple(rtt_argv(pgbench, conn.pgbench_args())),
        env=conn.options_env(),
        secret_env=conn.secret_env(),
        dirs=(RTT_DIR,),
        inputs={RTT_SCRIPT_FILE: RTT_SCRIPT},
        outputs=(f"{RTT_LOG_PREFIX}*",),
        expected_s=1.0,
        timeout_s=RTT_TIMEOUT_S,
    )


def rtt_metrics(log_files: Iterable[str | os.PathLike[str]]) -> dict[str, float | int]:
    """`client_rtt_queries` (the round trips timed) and, when there is one at least,
    `client_rtt_p50_ms` and `client_rtt_p99_ms` (nearest-rank, exact: txlog.percentile)."""
    summary = txlog.read_logs(log_files)
    if summary.aggregated:
        raise ValueError("the round-trip probe's log is aggregated: it needs every transaction")
    out: dict[str, float | int] = {"client_rtt_queries": summary.transactions}
    if summary.histogram:
        out["client_rtt_p50_ms"] = txlog.percentile(summary.histogram, 50) / 1000
        out["client_rtt_p99_ms"] = txlog.percentile(summary.histogram, 99) / 1000
    return out
