"""--client socket|tcp for clusters howfast creates on this machine (issue 28 item 4): the
pure parts (the placement, the initdb arguments, the kind's choice and refusals, the runner's
choice of connection). The real server is in tests/integration/test_client_placement.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from howfast.design import DesignOptions
from howfast.errors import UsageError
from howfast.hosts.local import LocalHost
from howfast.machine.pgbin import PgInstall
from howfast.runner.step import client_connection
from howfast.targets import registry
from howfast.targets.base import Connection
from howfast.targets.capabilities import HasClient
from howfast.targets.kind import TargetOptions
from howfast.targets.kinds.directory import local_client
from howfast.targets.local import LocalOptions, LocalTarget, client_placement
from howfast.workloads.base import StepOutcome

INSTALL = PgInstall(bindir=Path("/nonexistent"), version="15", source="test")
SERVER = Connection("/dev/shm/howfast-run-x", 5433, "howfast", "postgres")


def test_socket_placement_is_the_servers_own_connection() -> None:
    placed = client_placement("socket", SERVER, LocalHost(INSTALL), None)
    assert placed.connection == SERVER
    assert placed.record == {
        "placement": "socket",
        "address": "/dev/shm/howfast-run-x/.s.PGSQL.5433",
    }


def test_tcp_placement_dials_loopback_with_the_password_in_the_environment_only() -> None:
    placed = client_placement("tcp", SERVER, LocalHost(INSTALL), "s3cret")
    conn = placed.connection
    assert (conn.host, conn.port, conn.user) == ("127.0.0.1", 5433, "howfast")
    assert conn.secret_env() == {"PGPASSWORD": "s3cret"}
    assert "s3cret" not in " ".join(conn.pgbench_args())
    assert "s3cret" not in repr(conn) and "s3cret" not in str(placed.record)
    assert placed.record == {"placement": "tcp", "address": "127.0.0.1:5433"}


def test_tcp_asks_a_password_over_tcp_and_keeps_the_socket_trusted() -> None:
    socket_argv = LocalTarget(Path("/mnt/a"), INSTALL).server.initdb_argv()
    assert "--auth=trust" in socket_argv
    target = LocalTarget(Path("/mnt/a"), INSTALL, options=LocalOptions(client="tcp"))
    argv = target.server.initdb_argv()
    assert "--auth=trust" not in argv
    assert "--auth-local=trust" in argv and "--auth-host=scram-sha-256" in argv
    (pwfile,) = [a for a in argv if a.startswith("--pwfile=")]
    assert (
        target.client_access.password is not None
        and target.client_access.password not in " ".join(argv)
    )
    assert pwfile.endswith("/client-password")
    # two targets never share a password
    assert LocalTarget(
        Path("/mnt/a"), INSTALL, options=LocalOptions(client="tcp")
    ).client_access.password != (target.client_access.password)


def test_dry_run_shows_the_tcp_connection() -> None:
    planned = (
        LocalTarget(Path("/mnt/a"), INSTALL, options=LocalOptions(client="tcp"))
        .planned()
        .connection
    )
    assert planned is not None and planned.host == "127.0.0.1"
    socket = LocalTarget(Path("/mnt/a"), INSTALL).planned().connection
    assert socket is not None and socket.host.startswith("/")


@pytest.mark.parametrize(
    ("client", "placement"), [(None, "socket"), ("socket", "socket"), ("tcp", "tcp")]
)
def test_the_directory_kind_places_the_client(client: str | None, placement: str) -> None:
    assert local_client(DesignOptions(client=client)) == placement  # type: ignore[arg-type]


@pytest.mark.parametrize("client", ["pod", "same-pod"])
def test_pod_placements_are_for_k8s(client: str) -> None:
    with pytest.raises(UsageError, match=f"--client {client} is for k8s:// targets"):
        local_client(DesignOptions(client=client))  # type: ignore[arg-type]


def test_the_query_places_the_client_and_wins_over_the_option() -> None:
    options = TargetOptions(INSTALL, design=DesignOptions(client="socket"))
    (target,) = registry.make_targets(["/mnt/a?client=tcp"], options)
    assert isinstance(target, LocalTarget) and target.client_access.mode == "tcp"
    (plain,) = registry.make_targets(["/mnt/a"], options)
    assert isinstance(plain, LocalTarget) and plain.client_access.mode == "socket"


def test_a_dsn_target_refuses_client() -> None:
    options = TargetOptions(INSTALL, design=DesignOptions(client="tcp"))
    with pytest.raises(UsageError, match="--client places the client of a server howfast creates"):
        registry.make_targets(["postgresql://u@db.example/app"], options)


def test_client_side_workloads_get_the_placements_connection() -> None:
    target = LocalTarget(Path("/mnt/a"), INSTALL, options=LocalOptions(client="tcp"))
    assert isinstance(target, HasClient)
    target.server.connection = replace(SERVER)
    target.server.port = SERVER.port
    tcp = client_connection(target, "pgbench", SERVER)
    assert tcp is not None and tcp.host == "127.0.0.1" and tcp.password is not None
    # fio is not a database client; without a server there is nothing to place
    assert client_connection(target, "fio", SERVER) == SERVER
    assert client_connection(target, "pgbench", None) is None


def test_prepare_metrics_are_kept_under_the_steps() -> None:
    prepared = StepOutcome(metrics={"client_rtt_p50_ms": 0.03, "tps": 1.0})
    merged = StepOutcome(metrics={"tps": 900.0}).merged(prepared)
    assert merged.metrics == {"client_rtt_p50_ms": 0.03, "tps": 900.0}
