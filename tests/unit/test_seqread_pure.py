"""seqread's pure parts: which table, the forced sequential scan, the cold verdict."""

from __future__ import annotations

from howfast.workloads.seqread.workload import (
    COLD_SHARE,
    cold_verdict,
    largest_table,
    read_metrics,
    scan_nodes,
    scan_settings,
)


def test_largest_table_sums_partitions_under_their_parent():
    rows = [
        ("pgbench_branches", None, 8192),
        ("pgbench_tellers", None, 8192),
        ("pgbench_history", None, 0),
        ("pgbench_accounts_1", "pgbench_accounts", 600_000),
        ("pgbench_accounts_2", "pgbench_accounts", 600_000),
    ]
    assert largest_table(rows) == ("pgbench_accounts", 1_200_000)
    assert largest_table([("pgbench_accounts", None, 13_434_880)]) == (
        "pgbench_accounts",
        13_434_880,
    )
    assert largest_table([]) is None


def test_scan_settings_force_a_sequential_scan_and_parallelism_is_a_choice():
    serial = scan_settings(parallel=False)
    for name in ("enable_indexscan", "enable_indexonlyscan", "enable_bitmapscan"):
        assert serial[name] == "off"
    assert serial["max_parallel_workers_per_gather"] == "0"
    assert "max_parallel_workers_per_gather" not in scan_settings(parallel=True)


def test_scan_nodes_of_an_explain_plan():
    plan = {
        "Node Type": "Aggregate",
        "Plans": [
            {
                "Node Type": "Append",
                "Plans": [
                    {"Node Type": "Seq Scan", "Relation Name": "pgbench_accounts_1"},
                    {"Node Type": "Parallel Seq Scan", "Relation Name": "pgbench_accounts_2"},
                ],
            }
        ],
    }
    assert scan_nodes(plan) == ["Seq Scan", "Parallel Seq Scan"]
    assert scan_nodes({"Node Type": "Result"}) == []


def test_cold_verdict_and_metrics():
    table = 100 * 1024**2
    assert cold_verdict(table, int(COLD_SHARE * table)) is True
    assert cold_verdict(table, int(COLD_SHARE * table) - 1) is False
    assert cold_verdict(table, None) is None  # the device is not visible: no verdict
    m = read_metrics(table, 0.5, table, 1_000_000)
    assert m["seqread_s"] == 0.5 and m["table_bytes"] == table and m["rows"] == 1_000_000
    assert m["seqread_mbps"] == round(table / 1e6 / 0.5, 2)  # 10^6 bytes, as fio's MB/s
    assert m["cache_cold"] is True and m["device_read_bytes"] == table
    assert read_metrics(table, 0.5, None, 1)["cache_cold"] is None


def test_the_servers_own_reads_decide_when_they_were_counted():
    """A warm read while something else read the same disk (another test worker, the
    Kubernetes lab: seen in a loaded `make test`): the device read the table's size, the
    server itself nothing. The server's own reads give the verdict; without them, the
    device's still do."""
    table = 13 * 1024**2
    warm = read_metrics(table, 0.1, device_bytes=table, rows=1, server_bytes=64 * 1024)
    assert warm["cache_cold"] is False and warm["cache_cold_basis"] == "server"
    assert warm["device_read_bytes"] == table and warm["server_read_bytes"] == 64 * 1024
    cold = read_metrics(table, 0.1, device_bytes=table, rows=1, server_bytes=table)
    assert cold["cache_cold"] is True and cold["cache_cold_basis"] == "server"
    device_only = read_metrics(table, 0.1, device_bytes=table, rows=1)
    assert device_only["cache_cold"] is True and device_only["cache_cold_basis"] == "device"
    assert read_metrics(table, 0.1, None, 1)["cache_cold_basis"] is None
