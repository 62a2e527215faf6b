"""howfast's own iptables chains: a network partition between two servers on this machine
(the `partition` event, docs/events.md#partitions). Each cut is one chain of howfast's
(`HOWFAST-P-<token>`) that DROPs the packets of one TCP connection's two ends on loopback, and
one jump to it at the head of the filter table's INPUT chain: a packet dropped on input is
lost as on a cut cable (dropped on output, the sender would get an error at once). Nothing
else of the machine's packet filter is read for a decision or touched: a chain is removed
by its name, its jump by its exact rule.

The argv builders are pure; `PacketFilter` runs them (`-w`: it waits for the xtables lock
another program may hold).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from howfast.errors import HowfastError

CHAIN_PREFIX = "HOWFAST-P-"
CHAIN_NAME = re.compile(r"HOWFAST-P-[0-9a-f]{8}")
HOOK = "INPUT"  # where the jump goes: every packet on loopback passes it once, either way
INSTALL_HINT = "install it: sudo apt-get install -y iptables (or sudo dnf install -y iptables)"
CANDIDATES = (Path("/usr/sbin/iptables"), Path("/sbin/iptables"))
TIMEOUT_S = 30


@dataclass(frozen=True)
class Cut:
    """One TCP connection's two ends to drop: the server listening on `address`:`port`,
    reached from the same `address` (a loopback address of the connection's own)."""

    address: str
    port: int


def new_chain_name() -> str:
    """HOWFAST-P- and 8 hex digits: 18 characters, under iptables' 28."""
    return f"{CHAIN_PREFIX}{secrets.token_hex(4)}"


def is_ours(chain: str) -> bool:
    return CHAIN_NAME.fullmatch(chain) is not None


def cut_rules(chain: str, cut: Cut) -> list[list[str]]:
    """The rules of the chain (after `-w`): both directions of the connection dropped."""
    port = str(cut.port)
    return [
        ["-A", chain, "-p", "tcp", "-d", cut.address, "--dport", port, "-j", "DROP"],
        ["-A", chain, "-p", "tcp", "-s", cut.address, "--sport", port, "-j", "DROP"],
    ]


def jump_rule(chain: str) -> list[str]:
    """The jump, as it is inserted (`-I INPUT 1 ...`) and deleted (`-D INPUT ...`)."""
    return ["-j", chain]


def parse_dropped(listing: str) -> int:
    """Packets dropped by a chain, from `iptables -L CHAIN -n -v -x`: the first column of each
    rule's line (two header lines first)."""
    total = 0
    for line in listing.splitlines()[2:]:
        fields = line.split()
        if fields and fields[0].isdigit():
            total += int(fields[0])
    return total


def chains_in(save: str) -> list[str]:
    """howfast's chains in an `iptables-save` (`:NAME POLICY [..]`) or `iptables -S`
    (`-N NAME`) output."""
    found = set()
    for line in save.splitlines():
        words = line.removeprefix(":").removeprefix("-N ").split()
        if words and is_ours(words[0]):
            found.add(words[0])
    return sorted(found)


def find_iptables() -> Path | None:
    found = shutil.which("iptables")
    if found:
        return Path(found)
    return next((p for p in CANDIDATES if p.exists()), None)


class PacketFilter:
    """Runs iptables (as root: howfast's own chains only)."""

    def __init__(self, program: Path | None = None) -> None:
        self.program = program or find_iptables()

    def unusable(self) -> str | None:
        """Why the filter cannot be changed here (with what to do), None when it can."""
        if self.program is None:
            return f"iptables is not installed: {INSTALL_HINT}"
        if os.geteuid() != 0:
            return (
                "changing the packet filter needs root (iptables): run howfast as root, "
                "e.g. with sudo"
            )
        out = self._run(["-S", HOOK], check=False)
        if out.returncode != 0:
            said = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
            return f"iptables does not work here ({self.program}: {said[0]})"
        return None

    def install(self, chain: str, cut: Cut) -> None:
        """Make the chain, its rules, then the jump to it (the cut starts with the jump)."""
        if not is_ours(chain):
            raise HowfastError(f"{chain} is not a chain name of howfast's")
        self._run(["-N", chain])
        for rule in cut_rules(chain, cut):
            self._run(rule)
        self._run(["-I", HOOK, "1", *jump_rule(chain)])

    def exists(self, chain: str) -> bool:
        return self._run(["-S", chain], check=False).returncode == 0

    def chain_exists(self, chain: str) -> bool:
        """Whether the chain is there; False when iptables cannot tell (not installed, not
        root): what cannot be read here cannot be removed here either."""
        if self.program is None or os.geteuid() != 0:
            return False
        try:
            return self.exists(chain)
        except HowfastError:
            return False

    def dropped(self, chain: str) -> int | None:
        out = self._run(["-L", chain, "-n", "-v", "-x"], check=False)
        return parse_dropped(out.stdout) if out.returncode == 0 else None

    def remove(self, chain: str) -> bool:
        """The jump(s) to the chain, its rules, the chain; whether there was one. Only a
        chain named as howfast names its own."""
        if not is_ours(chain):
            raise HowfastError(f"{chain} is not a chain name of howfast's")
        for _ in range(100):  # one jump; more only if an insert was retried
            if self._run(["-D", HOOK, *jump_rule(chain)], check=False).returncode != 0:
                break
        if not self.exists(chain):
            return False
        self._run(["-F", chain])
        self._run(["-X", chain])
        return True

    def _run(self, args: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        if self.program is None:
            raise HowfastError(f"iptables is not installed: {INSTALL_HINT}")
        argv = [str(self.program), "-w", str(TIMEOUT_S), *args]
        try:
            out = subprocess.run(
                argv, capture_output=True, text=True, check=False, timeout=TIMEOUT_S + 5
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise HowfastError(f"{' '.join(argv)}: {exc}") from None
        if check and out.returncode != 0:
            said = (out.stderr or out.stdout).strip()
            raise HowfastError(f"{' '.join(argv)} failed (exit {out.returncode}): {said}")
        return out
