"""pgbench text output, versions 10 to 17: real recordings of pgbench 15 and outputs constructed
from the printf formats of the other versions (see tests/data/pgbench/README.md)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from howfast.workloads.pgbench.invocations import parse_all
from howfast.workloads.pgbench.parse import (
    PgbenchInit,
    PgbenchRun,
    ProgressPoint,
    ScriptStats,
    Statement,
    clean_lines,
    detect_kind,
    parse_any,
    parse_command_line,
    parse_init,
    parse_progress_line,
    parse_run,
    phase_key,
)

DATA = Path(__file__).parent.parent / "data" / "pgbench"

TPCB = [
    r"\set aid random(1, 100000 * :scale)",
    r"\set bid random(1, 1 * :scale)",
    r"\set tid random(1, 10 * :scale)",
    r"\set delta random(-5000, 5000)",
    "BEGIN;",
    "UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;",
    "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;",
    "UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;",
    "UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;",
    "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
    "VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);",
    "END;",
]
SELECT_ONLY = TPCB[0:1] + TPCB[6:7]
SIMPLE_UPDATE = TPCB[:7] + TPCB[9:]


def read(name: str) -> str:
    return (DATA / name).read_text()


def run_of(name: str) -> PgbenchRun:
    return parse_run(read(name))


# --- run summaries: every header value of every file ---------------------------------------------

RUNS: dict[str, dict[str, object]] = {
    "run-tpcb-pg10.txt": dict(
        version=None,
        mode="tpcb-like",
        scale=10,
        query_mode="simple",
        clients=4,
        threads=2,
        duration_s=5,
        transactions=9514,
        latency_avg_ms=2.100,
        latency_stddev_ms=1.049,
        tps=1904.087512,
        tps_including_connections=1902.461233,
        conn_time_ms=None,
        failed=None,
        command=("pgbench", "-c", "4", "-j", "2", "-T", "5", "-P", "1", "-r", "bench"),
    ),
    "run-rate-pg11.txt": dict(
        mode="select-only",
        scale=50,
        query_mode="prepared",
        clients=8,
        threads=4,
        duration_s=3,
        transactions=3002,
        skipped=3,
        late=14,
        latency_limit_ms=1.0,
        latency_avg_ms=0.405,
        latency_stddev_ms=0.296,
        rate_limit_lag_avg_ms=0.060,
        rate_limit_lag_max_ms=1.723,
        tps=1000.873001,
        tps_including_connections=1000.512305,
    ),
    "run-multi-pg12.txt": dict(
        mode="multiple",
        script=None,
        scale=1,
        clients=2,
        threads=1,
        duration_s=10,
        transactions=40112,
        latency_avg_ms=0.499,
        latency_stddev_ms=None,
        tps=4012.220094,
        tps_including_connections=4011.093311,
    ),
    "run-t-pg13.txt": dict(
        mode="tpcb-like",
        scale=100,
        clients=16,
        threads=4,
        duration_s=None,
        transactions_per_client=500,
        transactions=8000,
        transactions_expected=8000,
        latency_avg_ms=6.481,
        tps=2473.518220,
        tps_including_connections=2468.722014,
        aborted=False,
        errors=(),
    ),
    "run-aborted-pg13.txt": dict(
        clients=4,
        duration_s=60,
        transactions=1031,
        latency_avg_ms=232.861,
        tps=17.182004,
        aborted=True,
    ),
    "run-tpcb-pg14.txt": dict(
        version="14.11",
        mode="tpcb-like",
        scale=600,
        clients=8,
        threads=8,
        duration_s=2,
        transactions=1267,
        latency_avg_ms=12.614,
        latency_stddev_ms=4.497,
        conn_time_ms=28.105,
        tps=634.224710,
        tps_including_connections=None,
        max_tries=None,
        failed=None,
    ),
    "run-tpcb-pg15.txt": dict(
        version="15.18",
        server_version=None,
        mode="tpcb-like",
        scale=2,
        query_mode="simple",
        clients=4,
        threads=2,
        max_tries=1,
        duration_s=5,
        transactions=10881,
        failed=0,
        latency_avg_ms=1.815,
        latency_stddev_ms=1.558,
        conn_time_ms=15.030,
        tps=2177.857349,
        aborted=False,
        errors=(),
        command=None,
    ),
    "run-select-only-pg15.txt": dict(
        mode="select-only",
        clients=4,
        threads=2,
        duration_s=3,
        transactions=55208,
        failed=0,
        latency_avg_ms=0.194,
        latency_stddev_ms=0.351,
        conn_time_ms=20.236,
        tps=18485.636365,
    ),
    "run-simple-update-pg15.txt": dict(
        mode="simple-update",
        query_mode="prepared",
        clients=2,
        threads=1,
        duration_s=3,
        transactions=12588,
        latency_avg_ms=0.465,
        latency_stddev_ms=0.820,
        conn_time_ms=11.423,
        tps=4208.327594,
    ),
    "run-rate-limit-pg15.txt": dict(
        mode="tpcb-like",
        clients=4,
        duration_s=4,
        transactions=3080,
        failed=0,
        skipped=140,
        late=847,
        latency_limit_ms=2.0,
        latency_avg_ms=1.877,
        latency_stddev_ms=1.763,
        rate_limit_lag_avg_ms=0.277,
        rate_limit_lag_max_ms=9.283,
        conn_time_ms=12.727,
        tps=770.441656,
    ),
    "run-custom-pg15.txt": dict(
        mode="custom",
        script="custom.sql",
        scale=1,
        clients=2,
        threads=2,
        duration_s=3,
        transactions=21766,
        latency_avg_ms=0.274,
        latency_stddev_ms=0.348,
        tps=7259.263014,
    ),
    "run-multi-pg15.txt": dict(
        mode="multiple",
        scale=2,
        clients=4,
        threads=2,
        transactions=12307,
        failed=0,
        latency_avg_ms=0.954,
        latency_stddev_ms=1.110,
        conn_time_ms=16.015,
        tps=4099.645333,
    ),
    "run-t-pg15.txt": dict(
        transactions_per_client=1000,
        transactions=2000,
        transactions_expected=2000,
        duration_s=None,
        latency_avg_ms=0.915,
        latency_stddev_ms=None,
        conn_time_ms=7.534,
        tps=2185.075931,
    ),
    "run-connect-pg15.txt": dict(
        transactions=369,
        latency_avg_ms=10.849,
        conn_time_ms=None,
        conn_avg_ms=3.861,
        tps=184.343216,
        reconnect=True,
    ),
    "run-retries-pg15.txt": dict(
        mode="custom",
        script="hot.sql",
        clients=8,
        max_tries=3,
        transactions=4538,
        failed=3636,
        serialization_failures=3636,
        deadlock_failures=0,
        retried=5879,
        retries=10443,
        latency_avg_ms=1.726,
        latency_avg_includes_failures=False,
        tps=1511.698676,
    ),
    "run-log-fail-pg15.txt": dict(
        max_tries=2,
        transactions=2712,
        failed=2212,
        retried=3003,
        retries=3003,
        latency_avg_ms=2.413,
        latency_avg_includes_failures=True,
        latency_stddev_ms=None,
        tps=1369.614654,
    ),
    "run-log-lag-pg15.txt": dict(
        transactions=220,
        skipped=1,
        late=11,
        latency_limit_ms=5.0,
        rate_limit_lag_avg_ms=0.544,
        rate_limit_lag_max_ms=14.077,
        tps=110.799641,
    ),
    "run-simple-update-pg16.txt": dict(
        version="16.2",
        server_version="15.6",
        mode="simple-update",
        query_mode="extended",
        clients=10,
        threads=2,
        max_tries=1,
        transactions_per_client=2000,
        transactions=20000,
        transactions_expected=20000,
        failed=0,
        latency_avg_ms=3.318,
        conn_time_ms=41.902,
        tps=3013.642207,
    ),
    "run-retries-pg17.txt": dict(
        version="17.2",
        mode="multiple",
        scale=20,
        clients=8,
        threads=2,
        max_tries=3,
        duration_s=2,
        transactions=4511,
        failed=4,
        retried=75,
        retries=78,
        serialization_failures=None,
        latency_avg_ms=3.527,
        latency_stddev_ms=1.960,
        conn_time_ms=22.480,
        tps=2255.301822,
    ),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_run_summary_values(name: str) -> None:
    run = run_of(name)
    got = {key: getattr(run, key) for key in RUNS[name]}
    assert got == RUNS[name]


# --- per-statement latencies ---------------------------------------------------------------------

STATEMENTS: dict[str, list[Statement]] = {
    "run-tpcb-pg10.txt": [
        Statement(sql, lat)
        for sql, lat in zip(
            TPCB,
            [0.003, 0.001, 0.001, 0.001, 0.132, 0.271, 0.189, 0.301, 0.612, 0.215, 0.371],
            strict=True,
        )
    ],
    "run-rate-pg11.txt": [Statement(SELECT_ONLY[0], 0.002), Statement(SELECT_ONLY[1], 0.338)],
    "run-select-only-pg15.txt": [
        Statement(SELECT_ONLY[0], 0.000, failures=0),
        Statement(SELECT_ONLY[1], 0.194, failures=0),
    ],
    "run-simple-update-pg15.txt": [
        Statement(sql, lat, failures=0)
        for sql, lat in zip(
            SIMPLE_UPDATE, [0.001, 0.0, 0.0, 0.0, 0.070, 0.086, 0.129, 0.088, 0.090], strict=True
        )
    ],
    "run-retries-pg15.txt": [
        Statement("BEGIN ISOLATION LEVEL SERIALIZABLE;", 0.225, 0, 0),
        Statement("SELECT sum(bbalance) FROM pgbench_branches;", 0.235, 0, 0),
        Statement(
            "UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1;", 0.276, 3636, 10443
        ),
        Statement("END;", 0.292, 0, 4),
    ],
}


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_statements(name: str) -> None:
    assert list(run_of(name).statements) == STATEMENTS[name]


@pytest.mark.parametrize(
    ("name", "count", "failures"),
    [
        ("run-tpcb-pg14.txt", 11, None),
        ("run-tpcb-pg15.txt", 11, 0),
        ("run-rate-limit-pg15.txt", 11, 0),
        ("run-t-pg15.txt", 11, 0),
        ("run-custom-pg15.txt", 6, 0),
        ("run-simple-update-pg16.txt", 9, 0),
        ("run-multi-pg15.txt", 13, 0),
        ("run-multi-pg12.txt", 13, None),
        ("run-retries-pg17.txt", 13, None),
        ("run-connect-pg15.txt", 0, None),
    ],
)
def test_statement_counts(name: str, count: int, failures: int | None) -> None:
    statements = run_of(name).statements
    assert len(statements) == count
    if failures is not None:
        assert {s.failures for s in statements} == {failures}


def test_statements_of_pg14_and_pg15_tpcb() -> None:
    pg14 = run_of("run-tpcb-pg14.txt").statements
    assert [s.sql for s in pg14] == TPCB
    assert pg14[5].latency_ms == 9.220
    assert all(s.failures is None and s.retries is None for s in pg14)
    pg15 = run_of("run-tpcb-pg15.txt").statements
    assert [s.sql for s in pg15] == TPCB
    assert [s.latency_ms for s in pg15] == [
        0.001,
        0.0,
        0.0,
        0.0,
        0.152,
        0.207,
        0.267,
        0.293,
        0.470,
        0.207,
        0.218,
    ]


def test_custom_script_statement_is_kept_as_pgbench_printed_it() -> None:
    statements = run_of("run-custom-pg15.txt").statements
    # pgbench 12+ shows only the first 127 characters of a command
    assert statements[4].sql == (
        "UPDATE pgbench_accounts SET abalance = abalance + :delta, filler = "
        "'howfast-recording-with-a-deliberately-long-statement-to-tes"
    )
    assert statements[4].latency_ms == 0.121


def test_multiple_scripts_pg15() -> None:
    run = run_of("run-multi-pg15.txt")
    assert run.scripts == (
        ScriptStats(
            1,
            "<builtin: select only>",
            weight=1,
            transactions=6147,
            tps=2047.657419,
            failed=0,
            latency_avg_ms=0.222,
            latency_stddev_ms=0.314,
        ),
        ScriptStats(
            2,
            "<builtin: TPC-B (sort of)>",
            weight=1,
            transactions=6160,
            tps=2051.987913,
            failed=0,
            latency_avg_ms=1.684,
            latency_stddev_ms=1.137,
        ),
    )
    assert [s.script for s in run.statements] == [1] * 2 + [2] * 11
    assert [s.sql for s in run.statements] == SELECT_ONLY + TPCB
    assert run.statements[1].latency_ms == 0.221
    assert run.statements[10].latency_ms == 0.402  # the branches update of script 2


def test_multiple_scripts_pg12() -> None:
    run = run_of("run-multi-pg12.txt")
    assert [(s.number, s.name, s.weight, s.transactions, s.tps) for s in run.scripts] == [
        (1, "<builtin: select only>", 3, 30090, 3008.822140),
        (2, "<builtin: TPC-B (sort of)>", 1, 10022, 1002.271171),
    ]
    assert [(s.latency_avg_ms, s.latency_stddev_ms) for s in run.scripts] == [
        (0.171, 0.080),
        (1.483, 0.612),
    ]
    assert [s.sql for s in run.statements] == SELECT_ONLY + TPCB
    assert run.statements[1] == Statement(SELECT_ONLY[1], 0.166, script=1)
    assert run.statements[-1] == Statement("END;", 0.311, script=2)


def test_multiple_scripts_with_retries_pg17() -> None:
    run = run_of("run-retries-pg17.txt")
    assert [(s.name, s.transactions, s.failed, s.latency_avg_ms) for s in run.scripts] == [
        ("<builtin: TPC-B (sort of)>", 2240, 4, 5.921),
        ("<builtin: select only>", 2271, 0, 1.166),
    ]
    tellers, branches = run.statements[7], run.statements[8]
    assert tellers == Statement(TPCB[7], 0.902, failures=1, retries=20, script=1)
    assert branches == Statement(TPCB[8], 2.101, failures=3, retries=58, script=1)
    assert run.statements[-1] == Statement(SELECT_ONLY[1], 1.160, failures=0, retries=0, script=2)


# --- progress ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "count", "first", "last"),
    [
        (
            "run-tpcb-pg10.txt",
            5,
            ProgressPoint(1.0, 1875.9, 2.128, 1.141),
            ProgressPoint(5.0, 1934.3, 2.067, 0.965),
        ),
        (
            "run-rate-pg11.txt",
            3,
            ProgressPoint(1.0, 1001.0, 0.412, 0.301, lag_ms=0.061, skipped=0),
            ProgressPoint(3.0, 1003.0, 0.405, 0.299, lag_ms=0.060, skipped=1),
        ),
        (
            "run-tpcb-pg15.txt",
            5,
            ProgressPoint(1.0, 2950.9, 1.309, 0.850, failed=0),
            ProgressPoint(5.0, 1520.1, 2.612, 2.554, failed=0),
        ),
        (
            "run-rate-limit-pg15.txt",
            4,
            ProgressPoint(1.0, 749.9, 1.501, 1.075, lag_ms=0.216, skipped=9, failed=0),
            ProgressPoint(4.0, 811.9, 1.578, 1.054, lag_ms=0.201, skipped=13, failed=0),
        ),
        (
            "run-retries-pg15.txt",
            3,
            ProgressPoint(1.0, 1483.3, 1.773, 1.476, failed=1168, retried=1903, retries=3372),
            ProgressPoint(3.0, 1461.8, 1.774, 1.456, failed=1164, retried=1863, retries=3307),
        ),
        ("run-t-pg15.txt", 0, None, None),
    ],
)
def test_progress_series(
    name: str, count: int, first: ProgressPoint | None, last: ProgressPoint | None
) -> None:
    progress = run_of(name).progress
    assert len(progress) == count
    if count:
        assert (progress[0], progress[-1]) == (first, last)


@pytest.mark.parametrize(
    ("line", "point"),
    [
        (
            "progress: 1.0 s, 1234.5 tps, lat 0.812 ms stddev 0.123",
            ProgressPoint(1.0, 1234.5, 0.812, 0.123),
        ),
        (
            "progress: 12.0 s, 99.0 tps, lat 10.101 ms stddev 2.000, lag 0.012 ms",
            ProgressPoint(12.0, 99.0, 10.101, 2.0, lag_ms=0.012),
        ),
        (
            "progress: 2.0 s, 773.0 tps, lat 2.083 ms stddev 1.808, 0 failed, lag 0.308 ms, "
            "49 skipped",
            ProgressPoint(2.0, 773.0, 2.083, 1.808, 0.308, 49, 0),
        ),
        (
            "progress: 3.0 s, 10.0 tps, lat 1.000 ms stddev 0.500, 2 failed, 7 retried 9 retries",
            ProgressPoint(3.0, 10.0, 1.0, 0.5, failed=2, retried=7, retries=9),
        ),
        # --progress-timestamp, and pgbench 10 on an interval without transactions
        (
            "progress: 1715677000.123 s, 0.0 tps, lat -nan ms stddev -nan",
            ProgressPoint(1715677000.123, 0.0, 0.0, 0.0),
        ),
        (
            "2024-05-14T09:12:11.123456800Z progress: 1.0 s, 4100.2 tps, lat 0.972 ms stddev 0.402",
            ProgressPoint(1.0, 4100.2, 0.972, 0.402),
        ),
        ("tps = 2177.857349 (without initial connection time)", None),
        ("", None),
    ],
)
def test_parse_progress_line(line: str, point: ProgressPoint | None) -> None:
    assert parse_progress_line(line) == point


# --- errors and aborted runs ---------------------------------------------------------------------


def test_refused_connection_pg15() -> None:
    run = run_of("run-refused-pg15.txt")
    assert run.errors == (
        'pgbench: error: connection to server at "127.0.0.1", port 42779 failed: '
        "Connection refused",
        "pgbench: error: could not create connection for setup",
    )
    assert run.aborted
    assert run.tps is None
    assert run.metrics() == {}


def test_refused_connection_pg14() -> None:
    run = run_of("run-refused-pg14.txt")
    assert len(run.errors) == 2
    assert run.errors[1] == "pgbench: fatal: could not create connection for initialization"
    assert run.aborted


def test_aborted_client_pg15() -> None:
    run = run_of("run-aborted-pg15.txt")
    assert run.aborted
    assert run.transactions == 0
    assert run.failed == 0  # printed as "0 (NaN%)"
    assert run.errors[-1] == "pgbench: error: Run was aborted; the above results are incomplete."
    assert run.errors[0].endswith("aborted in command 1 query 0: ERROR:  division by zero")


def test_aborted_client_pg13() -> None:
    run = run_of("run-aborted-pg13.txt")
    assert run.aborted
    assert run.errors == (
        "pgbench: error: client 3 script 0 aborted in command 5 query 0: ERROR:  could not "
        'extend file "base/16384/16397": No space left on device',
        "pgbench: fatal: Run was aborted; the above results are incomplete.",
    )


def test_not_initialized_pg15() -> None:
    run = run_of("run-notinit-pg15.txt")
    assert run.version == "15.18"
    assert run.errors == (
        "pgbench: error: could not count number of branches: ERROR:  relation "
        '"pgbench_branches" does not exist',
    )
    assert run.aborted


def test_pg10_style_errors() -> None:
    text = (
        'connection to database "bench" failed:\n'
        "could not connect to server: Connection refused\n"
        '\tIs the server running on host "10.0.0.5" and accepting\n'
        "\tTCP/IP connections on port 5432?\n"
    )
    run = parse_run(text)
    assert run.errors == (
        'connection to database "bench" failed:',
        "could not connect to server: Connection refused",
    )
    assert run.aborted


# --- init ----------------------------------------------------------------------------------------

INITS: dict[str, PgbenchInit] = {
    "init-client-pg15.txt": PgbenchInit(
        scale=2,
        generate="client",
        total_s=0.36,
        completed=True,
        phases={
            "drop_s": 0.0,
            "create_s": 0.0,
            "generate_s": 0.19,
            "vacuum_s": 0.08,
            "primary_keys_s": 0.08,
        },
    ),
    "init-quiet-pg15.txt": PgbenchInit(
        scale=2,
        generate="client",
        total_s=0.27,
        completed=True,
        phases={
            "drop_s": 0.01,
            "create_s": 0.0,
            "generate_s": 0.16,
            "vacuum_s": 0.05,
            "primary_keys_s": 0.05,
        },
    ),
    "init-server-fkeys-pg15.txt": PgbenchInit(
        scale=None,
        generate="server",
        total_s=0.46,
        completed=True,
        phases={
            "drop_s": 0.01,
            "create_s": 0.0,
            "generate_s": 0.25,
            "vacuum_s": 0.08,
            "primary_keys_s": 0.08,
            "foreign_keys_s": 0.03,
        },
    ),
    "init-pg10.txt": PgbenchInit(scale=10, generate="client", completed=True),
    "init-pg12.txt": PgbenchInit(scale=5, generate="client", completed=True),
    "init-server-pg13.txt": PgbenchInit(
        scale=100,
        generate="server",
        total_s=21.87,
        completed=True,
        phases={
            "drop_s": 0.02,
            "create_s": 0.01,
            "generate_s": 14.52,
            "vacuum_s": 3.71,
            "primary_keys_s": 3.61,
        },
        command=("pgbench", "-i", "-s", "100", "-I", "dtGvp", "bench"),
    ),
    "init-tty-pg16.txt": PgbenchInit(
        scale=10,
        generate="client",
        total_s=1.93,
        completed=True,
        phases={
            "drop_s": 0.0,
            "create_s": 0.01,
            "generate_s": 1.02,
            "vacuum_s": 0.42,
            "primary_keys_s": 0.48,
        },
    ),
    "init-fkeys-pg17.txt": PgbenchInit(
        scale=3,
        generate="client",
        total_s=0.61,
        completed=True,
        phases={
            "drop_s": 0.0,
            "create_s": 0.01,
            "generate_s": 0.31,
            "vacuum_s": 0.11,
            "primary_keys_s": 0.12,
            "foreign_keys_s": 0.06,
        },
    ),
}


@pytest.mark.parametrize("name", sorted(INITS))
def test_init(name: str) -> None:
    assert parse_init(read(name)) == INITS[name]


def test_init_metrics() -> None:
    assert parse_init(read("init-server-pg13.txt")).metrics() == {
        "init_total_s": 21.87,
        "drop_s": 0.02,
        "create_s": 0.01,
        "generate_s": 14.52,
        "vacuum_s": 3.71,
        "primary_keys_s": 3.61,
        "scale": 100,
    }
    assert parse_init(read("init-pg10.txt")).metrics() == {"scale": 10}  # no timings before 13


def test_init_phase_names() -> None:
    assert phase_key("server-side generate") == "generate_s"
    assert phase_key("foreign keys") == "foreign_keys_s"
    assert phase_key("create foreign keys") == "create_foreign_keys_s"
    assert phase_key("Create Partitions") == "create_partitions_s"


def test_init_failure() -> None:
    text = (
        "dropping old tables...\n"
        "creating tables...\n"
        "generating data (client-side)...\n"
        "pgbench: error: PQendcopy failed\n"
    )
    init = parse_init(text)
    assert init.errors == ("pgbench: error: PQendcopy failed",)
    assert not init.completed
    assert init.generate == "client"


# --- kind detection, splitting, wrapped and reordered text ---------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("run-tpcb-pg10.txt", "run"),
        ("run-tpcb-pg15.txt", "run"),
        ("run-notinit-pg15.txt", "run"),
        ("run-refused-pg15.txt", None),
        ("init-pg10.txt", "init"),
        ("init-client-pg15.txt", "init"),
        ("init-server-pg13.txt", "init"),
        ("kubectl-init-and-run-pg16.txt", "run"),
    ],
)
def test_detect_kind(name: str, kind: str | None) -> None:
    assert detect_kind(read(name)) == kind


def test_kubectl_logs_with_init_run_and_wrapped_lines() -> None:
    init, run = parse_any(read("kubectl-init-and-run-pg16.txt"))
    assert init == PgbenchInit(
        scale=10,
        generate="client",
        total_s=1.52,
        completed=True,
        phases={
            "drop_s": 0.0,
            "create_s": 0.01,
            "generate_s": 0.88,
            "vacuum_s": 0.30,
            "primary_keys_s": 0.33,
        },
        command=("pgbench", "-i", "-s", "10", "-q", "postgres"),
    )
    assert run is not None
    assert run.command == (
        "pgbench",
        "-c",
        "4",
        "-j",
        "2",
        "-T",
        "3",
        "-P",
        "1",
        "-r",
        "-f",
        "/scripts/custom.sql",
        "postgres",
    )
    assert (run.version, run.mode, run.script) == ("16.4", "custom", "/scripts/custom.sql")
    assert (run.transactions, run.failed, run.tps) == (12423, 0, 4148.556102)
    assert run.progress[1] == ProgressPoint(2.0, 4152.8, 0.961, 0.388, failed=0)
    assert [s.sql for s in run.statements] == [
        r"\set aid random(1, 100000 * :scale)",
        "BEGIN;",
        "SELECT a.aid, a.abalance, t.tbalance, b.bbalance FROM pgbench_accounts a JOIN "
        "pgbench_tellers t ON t.bid = a.bid JOIN pgbench_b",
        "UPDATE pgbench_accounts SET abalance = abalance + 1, filler = "
        "'kubectl-recording-with-a-long-statement-that-pgbench-truncates'",
        "END;",
    ]
    assert [s.latency_ms for s in run.statements] == [0.002, 0.101, 0.420, 0.312, 0.128]


def test_statement_wrapped_once_is_joined() -> None:
    text = (
        "tps = 100.000000 (without initial connection time)\n"
        "statement latencies in milliseconds and failures:\n"
        "         0.101           0  BEGIN;\n"
        "         3.500           2  UPDATE pgbench_accounts SET abalance = abalance + :delta "
        "WHERE a\n"
        "id = :aid;\n"
        "         0.099           0  END;\n"
    )
    statements = parse_run(text).statements
    assert [s.sql for s in statements] == [
        "BEGIN;",
        "UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;",
        "END;",
    ]
    assert statements[1].failures == 2


def test_stdout_before_stderr() -> None:
    """A run's summary (stdout) may come before its progress lines (stderr), and an init's
    lines (stderr) after the run's summary."""
    stdout = read("run-tpcb-pg15.txt").split("transaction type:", 1)
    stderr_part, stdout_part = stdout[0], "transaction type:" + stdout[1]
    init_text = read("init-client-pg15.txt")
    init, run = parse_any(stdout_part + init_text + stderr_part)
    assert init is not None and init.total_s == 0.36 and init.scale == 2
    assert run is not None
    assert (run.tps, run.transactions, len(run.progress), len(run.statements)) == (
        2177.857349,
        10881,
        5,
        11,
    )


def test_run_output_ignores_init_lines_and_vice_versa() -> None:
    text = read("init-server-pg13.txt") + read("run-t-pg13.txt")
    assert parse_run(text).transactions == 8000
    assert parse_init(text).total_s == 21.87
    init, run = parse_any(read("run-t-pg13.txt"))
    assert init is None and run is not None


def test_clean_lines_strips_kubectl_prefixes_and_colours() -> None:
    text = (
        "[pod/bench-x7/pgbench] tps = 1.000000 (without initial connection time)\n"
        "\x1b[01;31mpgbench: error: \x1b[0mboom\r\n"
    )
    assert clean_lines(text) == [
        "tps = 1.000000 (without initial connection time)",
        "pgbench: error: boom",
    ]


@pytest.mark.parametrize(
    ("line", "argv"),
    [
        ("pgbench -c 4 -j 2 bench", ["pgbench", "-c", "4", "-j", "2", "bench"]),
        ("$ pgbench -i -s 10", ["pgbench", "-i", "-s", "10"]),
        ("+ pgbench -T 60 'my db'", ["pgbench", "-T", "60", "my db"]),
        (
            "postgres@db1:~$ /usr/lib/postgresql/15/bin/pgbench -S bench",
            ["/usr/lib/postgresql/15/bin/pgbench", "-S", "bench"],
        ),
        ("$ kubectl exec -it pg-0 -- pgbench -c 8 app", ["pgbench", "-c", "8", "app"]),
        ("pgbench (15.18 (Debian 15.18-0+deb12u1))", None),
        ("pgbench: error: connection to server failed", None),
        ("transaction type: <builtin: TPC-B (sort of)>", None),
        ("running pgbench now", None),
    ],
)
def test_parse_command_line(line: str, argv: list[str] | None) -> None:
    assert parse_command_line(line) == argv


# --- metrics -------------------------------------------------------------------------------------


def test_metrics_pg15_rate_limit() -> None:
    metrics = run_of("run-rate-limit-pg15.txt").metrics()
    statements = metrics.pop("statements")
    assert metrics == {
        "tps": 770.441656,
        "latency_avg_ms": 1.877,
        "latency_stddev_ms": 1.763,
        "conn_time_ms": 12.727,
        "transactions": 3080,
        "failed": 0,
        "schedule_lag_avg_ms": 0.277,
        "schedule_lag_max_ms": 9.283,
        "skipped": 140,
        "late": 847,
    }
    assert isinstance(statements, list) and len(statements) == 11
    assert statements[5] == {"sql": TPCB[5], "latency_ms": 0.274, "failures": 0}


def test_metrics_pg10_omit_unknown_values() -> None:
    metrics = run_of("run-tpcb-pg10.txt").metrics()
    statements = metrics.pop("statements")
    assert metrics == {
        "tps": 1904.087512,
        "latency_avg_ms": 2.100,
        "latency_stddev_ms": 1.049,
        "transactions": 9514,
        "tps_including_connections": 1902.461233,
    }
    assert statements == [
        {"sql": sql, "latency_ms": s.latency_ms}
        for sql, s in zip(TPCB, run_of("run-tpcb-pg10.txt").statements, strict=True)
    ]


def test_metrics_with_several_scripts_and_retries() -> None:
    metrics = run_of("run-retries-pg17.txt").metrics()
    assert metrics["retried"] == 75 and metrics["retries"] == 78
    statements = metrics["statements"]
    assert isinstance(statements, list)
    assert statements[8] == {
        "sql": TPCB[8],
        "latency_ms": 2.101,
        "failures": 3,
        "retries": 58,
        "script": 1,
    }


# --- pasted copies (issue 18, items 2 and 3) -----------------------------------------------------


@pytest.mark.parametrize(
    ("copy", "original"),
    [
        ("run-tpcb-pg15-rows-indent2.txt", "run-tpcb-pg15.txt"),
        ("run-tpcb-pg15-lstripped.txt", "run-tpcb-pg15.txt"),
        ("run-retries-pg15-collapsed.txt", "run-retries-pg15.txt"),
    ],
)
def test_statement_rows_are_read_by_their_columns_not_their_indent(copy: str, original: str):
    run, expected = run_of(copy), run_of(original)
    assert run.statements == expected.statements and len(run.statements) >= 4
    assert run.notes == ()
    assert run.metrics() == expected.metrics()


def test_statement_rows_without_the_announced_columns_are_dropped_with_a_note():
    run = run_of("run-select-only-pg15-rows-cut.txt")
    assert run.statements == ()
    (note,) = run.notes
    assert "per-statement latencies could not be read" in note and "SELECT" not in note
    assert run.tps == run_of("run-select-only-pg15.txt").tps


@pytest.mark.parametrize(
    ("copy", "original"),
    [
        ("run-tpcb-pg14-indented.txt", "run-tpcb-pg14.txt"),  # a Markdown code block
        ("run-multi-pg15-quoted.md", "run-multi-pg15.txt"),  # "> " quoted, fenced
        ("run-rate-pg11-list-item.md", "run-rate-pg11.txt"),  # a nested list item, with prose
    ],
)
def test_output_pasted_into_a_document_reads_as_the_original(copy: str, original: str):
    assert detect_kind(read(copy)) == "run"
    assert run_of(copy) == run_of(original)


# --- several invocations in one text (issue 18, item 1) ----------------------------------------


@pytest.mark.parametrize(
    "name",
    sorted(
        p.name
        for p in DATA.glob("*.txt")
        if not p.name.startswith("multi-") and "utf16" not in p.name
    ),
)
def test_a_text_of_one_invocation_reads_as_parse_any_reads_it(name: str):
    init, run = parse_any(read(name))
    assert parse_all(read(name)) == [item for item in (init, run) if item is not None]


def test_stdout_before_stderr_through_parse_all() -> None:
    before, after = read("run-tpcb-pg15.txt").split("transaction type:", 1)
    text = "transaction type:" + after + read("init-client-pg15.txt") + before
    (run, init) = parse_all(text)
    assert isinstance(run, PgbenchRun) and isinstance(init, PgbenchInit)
    assert (run.tps, len(run.progress), len(run.statements)) == (2177.857349, 5, 11)


def test_runs_of_a_loop_are_split_in_order() -> None:
    runs = parse_all(read("multi-four-runs-pg15.txt"))
    assert [(r.clients, len(r.progress), len(r.statements)) for r in runs] == [
        (1, 2, 11),
        (2, 2, 11),
        (4, 2, 11),
        (8, 2, 11),
    ]
    only_stdout = "".join(read(n).split("starting vacuum...end.\n")[-1] for n in TWO_OLD_RUNS)
    assert [r.tps for r in parse_all(only_stdout)] == [run_of(n).tps for n in TWO_OLD_RUNS]


TWO_OLD_RUNS = ("run-tpcb-pg10.txt", "run-t-pg13.txt")


@pytest.mark.parametrize(
    ("command", "rate"),
    [
        ("$ pgbench -R 250 -c 4 bench", 250.0),
        ("$ pgbench -R250 -c 4 bench", 250.0),
        ("$ pgbench --rate=12.5 -c 4 bench", 12.5),
        ("$ pgbench --rate 80 -c 4 bench", 80.0),
        ("$ pgbench -r -c 4 bench", None),
    ],
)
def test_rate_comes_from_the_echoed_command(command: str, rate: float | None) -> None:
    assert parse_run(command + "\n" + read("run-rate-limit-pg15.txt")).rate == rate


def test_joining_hard_wrapped_lines_takes_linear_time() -> None:
    """A text of 3 MB cut at one width (50 000 pieces) once took minutes: each piece was
    appended to a growing string (issue 18, item 8; benchmarks/import-long-lines)."""
    piece = "0123456789 wrapped text, not pgbench output; " * 2
    text = "\n".join([piece[:60]] * 50_000) + "\n"
    start = time.perf_counter()
    lines = clean_lines(text)
    assert time.perf_counter() - start < 5.0
    assert lines == [piece[:60] * 50_000]


def test_statements_of_several_files_before_9_6() -> None:
    """pgbench 9.3-9.5: "\\t%f\\t%s" rows under one header per file, no script block."""
    text = (
        "transaction type: Custom query\n"
        "scaling factor: 1\n"
        "query mode: simple\n"
        "number of clients: 2\n"
        "number of threads: 1\n"
        "duration: 10 s\n"
        "number of transactions actually processed: 9120\n"
        "latency average: 2.193 ms\n"
        "tps = 911.761243 (including connections establishing)\n"
        "tps = 912.157001 (excluding connections establishing)\n"
        "statement latencies in milliseconds, file 1:\n"
        "\t0.002176\t\\setrandom aid 1 :naccounts\n"
        "\t0.392412\tSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"
        "statement latencies in milliseconds, file 2:\n"
        "\t1.870020\tUPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 1;\n"
    )
    run = parse_run(text)
    assert [(s.script, s.latency_ms) for s in run.statements] == [
        (1, 0.002176),
        (1, 0.392412),
        (2, 1.87002),
    ]
    assert run.notes == () and run.tps == 912.157001
