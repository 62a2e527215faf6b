"""The round trip from the client to the server, timed before each pgbench step: pgbench runs
a script of one trivial query, one client, a thousand times, with its per-transaction log, and
the times between consecutive transactions' log times are the round trips (the query itself
costs microseconds; one client starts its next transaction at once). Not the log's latency
column: pgbench 15 reuses a clock reading within one pass of its loop, so a transaction whose
answer is already there logs a latency of 0 (151 of the 1000 recorded over a socket here; half
of them once in the lab's client pod). Where the
client is decides what is timed: a Unix socket, TCP over 127.0.0.1, a pod network, another
node. The probe runs on the host and connection the load runs with, so it times the load's
own path. `client_rtt_p50_ms` and `client_rtt_p99_ms` are step metrics (measured, not
derived); analysis/client.py multiplies them by a transaction's round trips.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path, PurePath

from howfast.hosts.base import Invocation
from howfast.targets.base import Connection

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


def round_trips_us(log_text: str) -> list[int]:
    """The microseconds between consecutive transactions of one client's log (lines
    `client_id transaction_no time script_no time_epoch time_us`), in transaction order."""
    done: list[tuple[int, int]] = []
    for line in log_text.splitlines():
        fields = line.split()
        if len(fields) < 6 or not all(f.isdigit() for f in (fields[1], fields[4], fields[5])):
            continue  # a failed or skipped transaction has a word for its latency: still timed
        done.append((int(fields[1]), int(fields[4]) * 1_000_000 + int(fields[5])))
    done.sort()
    return [b - a for (_, a), (_, b) in itertools.pairwise(done)]


def rtt_metrics(log_files: Iterable[str | os.PathLike[str]]) -> dict[str, float | int]:
    """`client_rtt_queries` (the transactions logged) and, when two at least were,
    `client_rtt_p50_ms` and `client_rtt_p99_ms` of the times between consecutive ones
    (nearest-rank, exact: txlog.percentile)."""
    from howfast.workloads.pgbench import txlog  # numpy: here, as a dry run never loads it

    log_files = list(log_files)
    summary = txlog.read_logs(log_files)
    if summary.aggregated:
        raise ValueError("the round-trip probe's log is aggregated: it needs every transaction")
    out: dict[str, float | int] = {"client_rtt_queries": summary.transactions}
    gaps = Counter(gap for f in log_files for gap in round_trips_us(Path(f).read_text()))
    if gaps:
        out["client_rtt_p50_ms"] = txlog.percentile(gaps, 50) / 1000
        out["client_rtt_p99_ms"] = txlog.percentile(gaps, 99) / 1000
    return out
