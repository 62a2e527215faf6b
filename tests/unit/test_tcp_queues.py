"""machine/tcp_queues.py on a recorded /proc/net/tcp (tests/data/proc/README.md): a connection
whose server end had sent 1,234 bytes its client had not read."""

from __future__ import annotations

from pathlib import Path

from howfast.machine import tcp_queues

DATA = Path(__file__).parent.parent / "data" / "proc" / "net-tcp-replication-recorded.txt"


def test_the_unread_bytes_are_the_clients_and_nothing_is_left_unacknowledged() -> None:
    queues = tcp_queues.parse(DATA.read_text(), "127.0.0.2", 57613)
    assert queues == tcp_queues.Queues(server_tx=0, server_rx=0, client_tx=0, client_rx=1234)


def test_another_port_or_address_has_no_connection() -> None:
    # the same port on other loopback addresses; and a port only a listener has (state 0A)
    listener_only = 57945  # E259 in the file
    for address, port in (
        ("127.0.0.3", 57613), ("127.0.0.1", 57613), ("127.0.0.2", listener_only)
    ):  # fmt: skip
        queues = tcp_queues.parse(DATA.read_text(), address, port)
        assert queues == tcp_queues.Queues(None, None, None, None), (address, port)


def test_a_missing_file_reads_as_none(tmp_path: Path) -> None:
    assert tcp_queues.read("127.0.0.2", 57613, tmp_path / "absent") is None
    assert tcp_queues.read("127.0.0.2", 57613, DATA) is not None
