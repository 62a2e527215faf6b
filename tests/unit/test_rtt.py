"""The round-trip probe (workloads/pgbench/rtt.py) on its recorded outputs
(tests/data/pgbench/rtt/, README.md there), and the sentence `why` makes of it
(analysis/client.py)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from howfast.analysis import client
from howfast.targets.base import Connection
from howfast.workloads.pgbench import rtt

DATA = Path(__file__).resolve().parents[1] / "data" / "pgbench" / "rtt"


def _nearest_rank(values: list[int], p: float) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


@pytest.mark.parametrize("place", ["socket", "tcp"])
def test_the_recorded_probe_gives_its_round_trips(place: str) -> None:
    logs = sorted((DATA / place).glob("tx.*"))
    assert len(logs) == 1  # one client, one thread: one log
    lines = [line.split() for line in logs[0].read_text().splitlines()]
    ends = [int(f[4]) * 1_000_000 + int(f[5]) for f in lines]
    gaps = [b - a for a, b in itertools.pairwise(ends)]
    metrics = rtt.rtt_metrics(logs)
    assert metrics["client_rtt_queries"] == len(lines) == rtt.RTT_TRANSACTIONS
    assert metrics["client_rtt_p50_ms"] == _nearest_rank(gaps, 50) / 1000
    assert metrics["client_rtt_p99_ms"] == _nearest_rank(gaps, 99) / 1000
    assert 0 < metrics["client_rtt_p50_ms"] <= metrics["client_rtt_p99_ms"]
    # pgbench 15's latency column says 0 for some of them (a clock reading reused)
    assert any(f[2] == "0" for f in lines)


# Lines of a probe's log from the lab's client pod (pgbench 15), where the latency column
# was 0 for more than half of the transactions and the log's p50 came out as 0.0 ms.
LAB_ZERO_LATENCIES = """0 12 0 0 1795645384 197081
0 13 0 0 1795645384 197125
0 14 0 0 1795645384 197168
0 15 0 0 1795645384 197211
"""


def test_round_trips_come_from_the_log_times_not_the_latency_column(tmp_path: Path) -> None:
    log = tmp_path / "tx.23"
    log.write_text(LAB_ZERO_LATENCIES)
    assert rtt.round_trips_us(LAB_ZERO_LATENCIES) == [44, 43, 43]
    metrics = rtt.rtt_metrics([log])
    assert metrics == {
        "client_rtt_queries": 4, "client_rtt_p50_ms": 0.043, "client_rtt_p99_ms": 0.044,
    }  # fmt: skip
    # across a second boundary, and in transaction order whatever the line order
    assert rtt.round_trips_us("0 2 5 0 11 10\n0 1 5 0 10 999990\n0 3 failed 0 11 30\n") == [
        20,
        20,
    ]


def test_tcp_over_loopback_was_slower_than_the_socket() -> None:
    socket = rtt.rtt_metrics(sorted((DATA / "socket").glob("tx.*")))
    tcp = rtt.rtt_metrics(sorted((DATA / "tcp").glob("tx.*")))
    assert tcp["client_rtt_p50_ms"] > socket["client_rtt_p50_ms"]


def test_the_invocation_is_what_was_recorded_and_keeps_the_password_out_of_argv() -> None:
    conn = Connection("127.0.0.1", 5433, "postgres", "postgres", password="pw")
    invocation = rtt.rtt_invocation("BIN/pgbench", conn)
    recorded = (DATA / "tcp" / "argv.txt").read_text().split()
    assert list(invocation.argv) == [a.replace("PORT", "5433") for a in recorded]
    assert "pw" not in invocation.argv and invocation.secret_env == {"PGPASSWORD": "pw"}
    assert invocation.inputs == {rtt.RTT_SCRIPT_FILE: "SELECT 1;\n"}
    assert invocation.dirs == ("rtt",) and invocation.outputs == ("rtt/tx*",)
    assert "secret_env" in invocation.document() and "pw" not in str(invocation.document())
    socket = rtt.rtt_invocation(
        "BIN/pgbench", Connection("/run/sock", 5433, "postgres", "postgres")
    )
    assert socket.secret_env == {}
    assert list(socket.argv) == [
        a.replace("PORT", "5433").replace("SOCKDIR", "/run/sock")
        for a in (DATA / "socket" / "argv.txt").read_text().split()
    ]


def test_an_empty_log_gives_the_count_only(tmp_path: Path) -> None:
    empty = tmp_path / "tx.1"
    empty.write_text("")
    assert rtt.rtt_metrics([empty]) == {"client_rtt_queries": 0}


def test_an_aggregated_log_is_refused(tmp_path: Path) -> None:
    agg = tmp_path / "tx.1"
    agg.write_text("1700000000 10 1000 200000 50 300 0 0 0 0 0 0 0 0 0\n")
    with pytest.raises(ValueError, match="aggregated"):
        rtt.rtt_metrics([agg])


def test_round_trips_per_transaction() -> None:
    assert client.round_trips({"mode": "tpcb-like"}) == 7
    assert client.round_trips({"mode": "simple-update"}) == 5
    assert client.round_trips({"mode": "select-only"}) == 1
    assert client.round_trips({"mode": "custom", "statements_per_transaction": 3}) == 3
    assert client.round_trips({"mode": "custom"}) is None
    assert client.round_trips({"mode": "custom", "statements_per_transaction": True}) is None


def test_the_sentence() -> None:
    assert client.network_sentence(7, 0.40, 3.7) == (
        "7 round trips x 0.40 ms = 2.8 ms of the 3.7 ms a transaction takes: "
        "the network sets the pace"
    )
    assert client.network_sentence(1, 0.134, 0.2).startswith("1 round trip x 0.13 ms = 0.13 ms ")
    assert [client.ms(v) for v in (0.024, 0.0996, 0.996, 9.96, 12.3, 0)] == [
        "0.024", "0.10", "1.0", "10", "12", "0",
    ]  # fmt: skip


def test_the_network_reason_only_when_round_trips_take_half_a_transaction() -> None:
    params = {"mode": "tpcb-like"}
    paced = client.network_reason(params, {"client_rtt_p50_ms": 0.40, "latency_avg_ms": 3.7})
    assert paced is not None and paced.startswith("7 round trips x 0.40 ms = 2.8 ms")
    # 7 x 0.065 ms (the socket recording) of a 3.7 ms transaction: 12%, not the network
    assert (
        client.network_reason(params, {"client_rtt_p50_ms": 0.065, "latency_avg_ms": 3.7}) is None
    )
    assert client.network_share(7, 0.4, 5.6) == pytest.approx(0.5)
    assert client.network_reason(params, {"latency_avg_ms": 3.7}) is None  # no probe
    assert (
        client.network_reason({"mode": "custom"}, {"client_rtt_p50_ms": 1, "latency_avg_ms": 1})
        is None
    )
    with pytest.raises(ValueError):
        client.network_share(7, 0.4, 0)
