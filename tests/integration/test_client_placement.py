"""--client socket|tcp on real PostgreSQL (issue 28 item 4): over TCP, pgbench reaches the
server on 127.0.0.1 with a password and the socket stays as before; every pgbench step stores
the round trip the probe timed; the target records the placement."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from howfast.hosts.local import LocalHost
from howfast.machine.pgbin import choose_install
from howfast.targets import pgquery
from howfast.targets.local import LocalOptions, LocalTarget
from howfast.workloads.pgbench import rtt
from tests.integration.conftest import TINY_PLAN, Howfast, postgres_pids_under

pytestmark = pytest.mark.integration


@pytest.fixture
def tcp_target(target_dir: Path) -> Iterator[LocalTarget]:
    target = LocalTarget(
        target_dir,
        choose_install(),
        settings={"log_connections": "on"},
        options=LocalOptions(client="tcp"),
    )
    try:
        yield target
    finally:
        target.stop()


def test_over_tcp_pgbench_reaches_loopback_with_a_password(
    tcp_target: LocalTarget, tmp_path: Path
) -> None:
    server = tcp_target.start()
    placed = tcp_target.client()
    assert placed.record == {"placement": "tcp", "address": f"127.0.0.1:{tcp_target.server.port}"}
    # the probe as a step runs it, through the client's connection
    install = tcp_target.install
    invocation = rtt.rtt_invocation(install.program("pgbench") or "pgbench", placed.connection)
    result = LocalHost(install).run(invocation, tmp_path)
    assert result.returncode == 0, result.stderr
    assert placed.connection.password is not None
    assert placed.connection.password not in result.stdout + result.stderr
    assert rtt.rtt_metrics(result.files.values())["client_rtt_queries"] == rtt.RTT_TRANSACTIONS
    log = tcp_target.server_log_tail(10_000) or ""
    assert "connection received: host=127.0.0.1" in log, log[-2000:]
    assert placed.connection.password not in log
    # howfast's own connection stays on the socket; TCP without the password is refused
    with pgquery.connect(server) as db:
        assert db.execute("SELECT inet_client_addr()").fetchone() == (None,)
        assert db.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(
            host="127.0.0.1", port=tcp_target.server.port, user=server.user, dbname="postgres"
        ).close()
    assert not any(tcp_target.dirs.run_dir.glob("client-password*"))  # type: ignore[union-attr]


def test_runs_store_the_round_trip_and_the_placement(howfast: Howfast, target_dir: Path) -> None:
    # Every transaction logged: the round trip comes from the probe before each step, not
    # from the load's log, and a sampled log needs a calibration run before each of the
    # three steps (workloads/pgbench/logsampling.py).
    full_log = TINY_PLAN.replace('duration = "1s"', 'duration = "1s"\nlatency_log = "full"')
    plan = howfast.plan(full_log)
    found: dict[str, tuple[dict[str, object], list[dict[str, object]]]] = {}
    for client in ("tcp", "socket"):
        out = howfast("run", str(plan), "--target", str(target_dir), "--client", client, "--json")
        assert out.returncode == 0, out.stderr[-3000:]
        doc = json.loads(out.stdout)
        steps = [s["metrics"] for s in doc["steps"] if s["workload"] == "pgbench"]
        found[client] = (doc["targets"][0]["client"], steps)
        assert postgres_pids_under(target_dir) == []
    tcp, tcp_steps = found["tcp"]
    socket, socket_steps = found["socket"]
    assert tcp["placement"] == "tcp" and str(tcp["address"]).startswith("127.0.0.1:")
    assert socket["placement"] == "socket" and str(socket["address"]).startswith("/")
    assert len(tcp_steps) == len(socket_steps) == 3
    for metrics in tcp_steps + socket_steps:
        assert metrics["client_rtt_queries"] == rtt.RTT_TRANSACTIONS
        assert 0 < metrics["client_rtt_p50_ms"] <= metrics["client_rtt_p99_ms"]  # type: ignore[operator]
        assert metrics["tps"] > 0  # type: ignore[operator]
    p50 = {c: sorted(float(m["client_rtt_p50_ms"]) for m in s) for c, (_, s) in found.items()}  # type: ignore[arg-type]
    p99 = {c: sorted(float(m["client_rtt_p99_ms"]) for m in s) for c, (_, s) in found.items()}  # type: ignore[arg-type]
    print(f"client_rtt p50 ms: {p50}; p99 ms: {p99}")


def test_a_bad_client_is_a_usage_error(howfast: Howfast, target_dir: Path) -> None:
    out = howfast("run", "quick", "--target", str(target_dir), "--client", "bogus")
    assert out.returncode == 2
    assert "'bogus' is not one of 'socket', 'tcp'" in out.stderr
    pod = howfast("run", "quick", "--target", f"{target_dir}?client=pod")
    assert pod.returncode == 2
    assert "--client pod is for k8s:// targets (directory targets: socket or tcp)" in pod.stderr
    assert not any(target_dir.iterdir())
