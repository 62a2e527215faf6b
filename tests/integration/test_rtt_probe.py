"""The round-trip probe run for real: its invocation through LocalHost against a real
PostgreSQL, over the Unix socket and over TCP 127.0.0.1 with the password."""

from __future__ import annotations

from pathlib import Path

import pytest

from howfast.hosts.local import LocalHost
from howfast.targets.base import Connection
from howfast.workloads.pgbench import rtt
from tests.conftest import PgServer


@pytest.mark.parametrize("place", ["socket", "tcp"])
def test_the_probe_times_a_thousand_round_trips(
    pg_server: PgServer, tmp_path: Path, place: str
) -> None:
    host = str(pg_server.socket_dir) if place == "socket" else "127.0.0.1"
    password = pg_server.password if place == "tcp" else None
    conn = Connection(host, pg_server.port, pg_server.user, "postgres", password=password)
    invocation = rtt.rtt_invocation(pg_server.bindir / "pgbench", conn)
    result = LocalHost().run(invocation, tmp_path)
    assert result.returncode == 0, result.stderr
    assert pg_server.password not in result.stdout + result.stderr
    metrics = rtt.rtt_metrics(result.files.values())
    assert metrics["client_rtt_queries"] == rtt.RTT_TRANSACTIONS
    # a loopback round trip: more than nothing, far less than a second even on a loaded machine
    assert 0 < metrics["client_rtt_p50_ms"] <= metrics["client_rtt_p99_ms"] < 1000
