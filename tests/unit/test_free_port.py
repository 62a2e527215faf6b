"""A server's port is free on every address it will listen on, not only on 127.0.0.1 (real
sockets on loopback addresses)."""

from __future__ import annotations

import socket

from howfast.targets.local_server import free_port, listen_ips, port_free_on


def test_listen_ips_keeps_ipv4_addresses_and_star():
    assert listen_ips("") == []
    assert listen_ips("127.0.0.2, 127.0.0.1") == ["127.0.0.2", "127.0.0.1"]
    assert listen_ips("*") == ["0.0.0.0"]
    assert listen_ips("localhost,::1,127.0.0.3") == ["127.0.0.3"]


def test_a_port_held_on_another_loopback_address_is_not_free_there():
    with socket.socket() as held:
        held.bind(("127.0.0.2", 0))
        held.listen()
        port = held.getsockname()[1]
        assert not port_free_on(port, ["127.0.0.2"])
        assert port_free_on(port, ["127.0.0.3"])  # the same port elsewhere is
    assert port_free_on(port, ["127.0.0.2"])


def test_the_free_port_binds_on_every_address_asked():
    addresses = ["127.0.0.2", "127.0.0.3"]
    port = free_port(addresses)
    with socket.socket() as a, socket.socket() as b, socket.socket() as c:
        a.bind(("127.0.0.1", port))
        b.bind(("127.0.0.2", port))
        c.bind(("127.0.0.3", port))
