"""The port-forward's byte pump (targets/k8s/cluster_streams.py) on real socket pairs: a send
to an end that has gone ends the pump quietly, as a failed receive does. A loaded lab run
printed a thread's BrokenPipeError traceback when the server's pod went away under a
forwarded connection."""

from __future__ import annotations

import socket
import threading

from howfast.targets.k8s.cluster_streams import _pump


def test_bytes_go_both_ways_until_one_end_closes() -> None:
    client, a = socket.socketpair()
    b, server = socket.socketpair()
    pump = threading.Thread(target=_pump, args=(a, b, threading.Event()))
    pump.start()
    client.sendall(b"ping")
    assert server.recv(16) == b"ping"
    server.sendall(b"pong")
    assert client.recv(16) == b"pong"
    client.close()
    pump.join(5)
    assert not pump.is_alive()
    for s in (a, b, server):
        s.close()


def test_a_send_to_an_end_that_has_gone_ends_the_pump_without_an_error() -> None:
    client, a = socket.socketpair()
    b, server = socket.socketpair()
    # b can no longer send (EPIPE), as to a pod's stream that has gone, while nothing is
    # there to read on it: the pump meets the failure in its send, not in a receive
    b.shutdown(socket.SHUT_WR)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            _pump(a, b, threading.Event())
        except BaseException as exc:  # what the thread would print as a traceback
            failures.append(exc)

    pump = threading.Thread(target=run)
    pump.start()
    client.sendall(b"data for a pod that is gone")
    pump.join(5)
    assert not pump.is_alive() and failures == []
    for s in (client, a, b, server):
        s.close()
