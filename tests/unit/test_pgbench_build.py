"""pgbench argument lists built from step params."""

from __future__ import annotations

from pathlib import Path

import pytest

from howfast.model import JSONValue
from howfast.targets.base import Connection
from howfast.workloads.pgbench.build import (
    calibration_invocation,
    init_argv,
    resolve_jobs,
    run_argv,
    statement_latencies,
)

PGBENCH = Path("/usr/bin/pgbench")
CONN = ["-h", "/run/x", "-p", "5555", "-U", "howfast", "postgres"]


@pytest.mark.parametrize(
    ("clients", "cores", "jobs"),
    [(1, 2, 1), (2, 2, 2), (8, 2, 2), (3, 2, 1), (6, 4, 3), (16, 32, 16)],
)
def test_jobs_default_to_a_divisor_of_clients_at_most_cores(clients, cores, jobs):
    assert resolve_jobs(clients, cores) == jobs
    assert resolve_jobs(clients, cores, requested=5) == 5


def test_init_argv():
    argv = init_argv(PGBENCH, {"scale": 10, "generate": "client", "fillfactor": 100}, CONN)
    assert argv == [str(PGBENCH), "-i", "-s", "10", *CONN]
    argv = init_argv(
        PGBENCH,
        {
            "scale": 2,
            "generate": "server",
            "fillfactor": 90,
            "partitions": 4,
            "partition_method": "hash",
            "extra_args": ["--unlogged-tables"],
        },
        CONN,
    )
    assert argv[:4] == [str(PGBENCH), "-i", "-s", "2"]
    assert argv[argv.index("-I") + 1] == "dtGvp" and argv[argv.index("-F") + 1] == "90"
    assert argv[argv.index("--partitions") + 1] == "4"
    assert argv[argv.index("--partition-method") + 1] == "hash"
    assert "--unlogged-tables" in argv and argv[-len(CONN) :] == CONN


def test_run_argv_has_progress_and_the_log_and_no_statement_latencies_for_select_only():
    argv = run_argv(
        PGBENCH,
        {"mode": "select-only", "clients": 4, "duration_s": 2.5},
        jobs=2,
        log_prefix=Path("/dev/shm/x/tx"),
        conn_args=CONN,
    )
    assert argv[:3] == [str(PGBENCH), "-b", "select-only"]
    assert argv[argv.index("-c") + 1] == "4" and argv[argv.index("-j") + 1] == "2"
    assert argv[argv.index("-T") + 1] == "3"  # pgbench takes whole seconds: rounded up
    assert {"-l", "--log-prefix=/dev/shm/x/tx"} <= set(argv)
    assert "-r" not in argv  # select-only: no per-statement latencies unless asked
    assert not any(a.startswith("--sampling-rate") for a in argv)  # every transaction
    assert argv[argv.index("-P") + 1] == "1"
    assert argv[-len(CONN) :] == CONN


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"mode": "select-only"}, False),
        ({"mode": "tpcb-like"}, True),
        ({"mode": "simple-update"}, True),
        ({"mode": "custom", "scripts": ["a.sql"]}, True),
        ({"mode": "select-only", "statement_latencies": True}, True),
        ({"mode": "tpcb-like", "statement_latencies": False}, False),
    ],
)
def test_statement_latencies_where_cheap_or_asked(params, expected):
    argv = run_argv(
        PGBENCH,
        {**params, "clients": 1, "duration_s": 1},
        jobs=1,
        log_prefix=Path("tx"),
        conn_args=CONN,
    )
    assert ("-r" in argv) is expected
    assert statement_latencies(params) is expected


@pytest.mark.parametrize(
    ("sampling", "flag"),
    [(0.0123, "--sampling-rate=0.0123"), ("SAMPLING", "--sampling-rate=SAMPLING"), (1.0, None)],
)
def test_run_argv_samples_the_log_below_a_rate_of_one(sampling, flag):
    argv = run_argv(
        PGBENCH,
        {"mode": "select-only", "clients": 2, "duration_s": 5, "log_sampling_rate": sampling},
        jobs=2,
        log_prefix=Path("tx"),
        conn_args=CONN,
    )
    found = [a for a in argv if a.startswith("--sampling-rate")]
    assert found == ([flag] if flag else [])
    assert "-l" in argv


def test_bare_argv_and_calibration_invocation_have_no_instrumentation():
    params = {"mode": "select-only", "clients": 4, "duration_s": 2, "log_sampling_rate": 0.1}
    bare = run_argv(PGBENCH, params, jobs=2, log_prefix=None, conn_args=CONN)
    assert bare == [str(PGBENCH), "-b", "select-only", "-c", "4", "-j", "2", "-T", "2", *CONN]
    conn = Connection("/run/x", 5555, "howfast", "postgres", password="secret")
    calibration = calibration_invocation(PGBENCH, params, jobs=2, conn=conn)
    assert list(calibration.argv) == [*bare[: -len(CONN)], *conn.pgbench_args()]
    assert calibration.outputs == () and calibration.dirs == ()
    assert "secret" not in " ".join(calibration.argv) and calibration.secret_env


def test_run_argv_rate_limit_protocol_scripts_and_transactions():
    argv = run_argv(
        PGBENCH,
        {
            "mode": "custom",
            "scripts": ["a.sql@3", "b.sql"],
            "clients": 1,
            "transactions": 50,
            "rate": 200,
            "latency_limit_ms": 5.0,
            "protocol": "prepared",
        },
        jobs=1,
        log_prefix=Path("/tmp/tx"),
        conn_args=CONN,
    )
    assert argv[1:5] == ["-f", "a.sql@3", "-f", "b.sql"]
    assert "-T" not in argv and argv[argv.index("-t") + 1] == "50"
    assert argv[argv.index("-R") + 1] == "200" and argv[argv.index("-L") + 1] == "5.0"
    assert argv[argv.index("-M") + 1] == "prepared"


def test_run_argv_without_progress_keeps_the_log_and_drops_only_p():
    params: dict[str, JSONValue] = {"mode": "select-only", "clients": 2, "log_sampling_rate": 0.02}
    with_progress = run_argv(PGBENCH, params, jobs=2, log_prefix=Path("tx"), conn_args=CONN)
    without = run_argv(
        PGBENCH, params, jobs=2, log_prefix=Path("tx"), conn_args=CONN, progress=False
    )
    assert "-P" in with_progress and "-P" not in without
    assert [a for a in with_progress if a not in ("-P", "1")] == without
    assert {"-l", "--sampling-rate=0.02"} <= set(without)
