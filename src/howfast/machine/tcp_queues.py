"""The kernel's queues of one TCP connection on this machine's loopback, from /proc/net/tcp:
what the sender's kernel holds not yet acknowledged (`tx_queue`) and what the receiver's kernel
received that its process has not read (`rx_queue`). Read at a failover's kill (the primary's
processes stopped): WAL the walsender had written into its socket but the standby had not got,
and WAL the standby's kernel had received but its walreceiver had not read yet.

`parse` is pure (tested on a recorded table); `read` reads the file.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from pathlib import Path

PROC_NET_TCP = Path("/proc/net/tcp")
ESTABLISHED = "01"


@dataclass(frozen=True)
class Queues:
    """Bytes queued on each side of the connection to `address`:`port` (the server's end)."""

    server_tx: int | None  # the server's socket: sent, not yet acknowledged by the peer
    server_rx: int | None
    client_tx: int | None
    client_rx: int | None  # the client's socket: received, not yet read by its process


def _endpoint(text: str) -> tuple[str, int]:
    """'0200007F:1F90' → ('127.0.0.2', 8080): /proc/net/tcp's IPv4 is in host byte order."""
    addr, port = text.split(":")
    return socket.inet_ntoa(struct.pack("<I", int(addr, 16))), int(port, 16)


def parse(table: str, address: str, port: int) -> Queues:
    """The queues of the established connection(s) whose server end is `address`:`port`."""
    server_tx = server_rx = client_tx = client_rx = None
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 5 or fields[3] != ESTABLISHED:
            continue
        try:
            local, remote = _endpoint(fields[1]), _endpoint(fields[2])
            tx, rx = (int(v, 16) for v in fields[4].split(":"))
        except (ValueError, OSError, struct.error):
            continue
        if local == (address, port):
            server_tx, server_rx = (server_tx or 0) + tx, (server_rx or 0) + rx
        elif remote == (address, port):
            client_tx, client_rx = (client_tx or 0) + tx, (client_rx or 0) + rx
    return Queues(server_tx, server_rx, client_tx, client_rx)


def read(address: str, port: int, source: Path = PROC_NET_TCP) -> Queues | None:
    try:
        return parse(source.read_text(), address, port)
    except OSError:
        return None
