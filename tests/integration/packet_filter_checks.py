"""What a test may say of the machine's packet filter while other tests change it.

`make test` runs its sessions side by side: the emulated-volume session's failover trials and
the other workers' failover and partition tests make and remove chains of howfast's
(`HOWFAST-P-*`) while a test of this one runs, and the Kubernetes lab's kube-proxy adds and
removes its own. So a test checks the chains its own run made, named by the run itself (an
event mark's facts: a partition's `chain`, a failover's `link.chain`) or by its process's
ownership registry file while it runs, never "no chain of howfast's at all"."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from howfast.event_marks import marks_from_section
from howfast.machine.packetfilter import chains_in, is_ours
from howfast.store import open_store
from howfast.targets.leftovers.registry import parse_record, registry_dir

IPTABLES = shutil.which("iptables") or "/usr/sbin/iptables"
LAB_CHAINS = ("KUBE-", "HOWFAST-LAB-", "CNI-")  # the Kubernetes lab's, made beside the tests


def filter_rules() -> set[str]:
    """The filter table's rules and chains, as iptables-save writes them, counters left out.
    `iptables -S` first: it makes the table, when nothing had, so that before and after
    are read alike."""
    subprocess.run([IPTABLES, "-w", "-S"], capture_output=True, check=True)
    save = subprocess.run(
        [f"{IPTABLES}-save", "-t", "filter"], capture_output=True, text=True, check=True
    ).stdout
    return {line.split(" [")[0] for line in save.splitlines() if line and not line.startswith("#")}


def howfast_chains_now() -> set[str]:
    listing = subprocess.run([IPTABLES, "-w", "-S"], capture_output=True, text=True, check=True)
    return set(chains_in(listing.stdout))


def chains_of_run(store: Path, run_id: int) -> set[str]:
    """The chains a stored run's events say they made: partitions' and failovers' link cuts."""
    run = open_store(str(store), reading=True).get_run(run_id)
    assert run is not None
    found = set()
    for step in run.steps:
        section = step.sections.get("events")
        if section is None:
            continue
        for mark in marks_from_section(section):  # type: ignore[arg-type]
            link = mark.facts.get("link")
            linked = link.get("chain") if isinstance(link, dict) else None
            for name in (mark.facts.get("chain"), linked):
                if isinstance(name, str):
                    assert is_ours(name), name
                    found.add(name)
    return found


def chains_registered_by(pid: int) -> set[str]:
    """The chains a running howfast process has written in its ownership registry file
    (`HOST-PID-TICKS.jsonl`, read as `howfast cleanup` reads it): it writes each one before
    it makes it."""
    found = set()
    for path in registry_dir().glob(f"*-{pid}-*.jsonl"):
        record = parse_record(path.read_text(), str(path))
        found |= {item.path for item in record.items if item.kind == "packet filter"}
    return found


def _names(line: str) -> set[str]:
    return set(line.replace(":", " ").split())


def wait_for_chain_of(pid: int, timeout_s: float = 30) -> tuple[str, list[str]]:
    """The chain the howfast process `pid` made, once it exists: its name and its lines in
    `iptables -S` (the chain, its rules, the jump to it)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rules = subprocess.run([IPTABLES, "-w", "-S"], capture_output=True, text=True).stdout
        for chain in chains_registered_by(pid):
            lines = [line for line in rules.splitlines() if chain in _names(line)]
            if lines:
                return chain, lines
        time.sleep(0.2)
    raise AssertionError(f"no chain of howfast PID {pid} appeared within {timeout_s:g} s")


def assert_same_filter(before: set[str], ours: set[str], pid: int | None = None) -> None:
    """Nothing of this run's chains left, nothing of anyone else's removed. `ours`: the
    chains the run named; with `pid`, also those its registry file still names (the file
    stays while anything it names is left). Lines of the lab's chains and of other howfast
    runs' chains (other tests' failovers and partitions, made and removed by their own runs
    meanwhile) are left out on both sides; every other rule there before must still be."""
    if pid is not None:
        ours = ours | chains_registered_by(pid)

    def theirs(line: str) -> bool:
        names = _names(line)
        return any(lab in line for lab in LAB_CHAINS) or any(
            is_ours(name) and name not in ours for name in names
        )

    after = filter_rules()
    removed = {line for line in before - after if not theirs(line)}
    assert removed == set(), removed
    left = {line for line in after if ours & _names(line)}
    assert left == set(), left
