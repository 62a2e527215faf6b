"""A replication link cut by an iptables chain of howfast's (machine/packetfilter.py), for the
`partition` event and for a `failover`'s node failure (docs/events.md): the chain is in the
ownership registry before it exists (`howfast cleanup` finds it after a SIGKILL), kept in a set
of this process's cuts until removed, and whatever is still cut when the process ends (Ctrl-C,
an error before an undo ran) is removed at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import threading

from howfast.errors import HowfastError
from howfast.machine.packetfilter import Cut, PacketFilter, new_chain_name
from howfast.targets.leftovers import registry

# The chains this process made and has not removed: removed at exit (Ctrl-C included).
_installed: set[str] = set()
_lock = threading.Lock()


def cut_link(packets: PacketFilter, cut: Cut) -> str:
    """Install a new chain dropping `cut`'s packets both ways; its name. Nothing is left when
    the install fails (the error is raised)."""
    chain = new_chain_name()
    registry.own_packet_filter(chain)  # before it exists: `howfast cleanup` finds it
    with _lock:
        _installed.add(chain)
    try:
        packets.install(chain, cut)
    except BaseException:
        remove(packets, chain)
        raise
    return chain


def is_cut(chain: str) -> bool:
    with _lock:
        return chain in _installed


def remove(packets: PacketFilter, chain: str) -> bool:
    """Remove a chain this process made, once (forgotten only when removed)."""
    with _lock:
        if chain not in _installed:
            return False
    removed = packets.remove(chain)
    with _lock:
        _installed.discard(chain)
    return removed


@atexit.register
def _remove_all() -> None:
    """What is still cut when this process ends (an undo that could not run)."""
    with _lock:
        left = list(_installed)
    for chain in left:
        with contextlib.suppress(HowfastError):
            remove(PacketFilter(), chain)
