"""The `partition` event's pure parts and refusals (events/partition.py, machine/packetfilter.py,
the standbys' replication over TCP in targets/replicas/builders.py): what the target refuses
before anything starts, the iptables rules and the listing's parsers, the SCRAM verifier,
the passfile line, the ownership registry's line, the verdict line. The real cut, on real
PostgreSQL and iptables, is tests/integration/test_partition.py."""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path

import pytest

from howfast.analysis.events import EventFigures, event_line, partition_cause
from howfast.design import DesignOptions
from howfast.event_marks import EventMark
from howfast.events.checks import refusals
from howfast.machine import packetfilter
from howfast.machine.packetfilter import Cut
from howfast.machine.pgbin import PgInstall
from howfast.plugin.events import event_from_text
from howfast.store import liveness
from howfast.targets import registry
from howfast.targets.k8s.spec import K8sOptions
from howfast.targets.kind import TargetOptions
from howfast.targets.leftovers.find import find
from howfast.targets.leftovers.machine import RegistryFile, Snapshot
from howfast.targets.leftovers.registry import Owned, Record, parse_record
from howfast.targets.local import LocalTarget
from howfast.targets.replicas import builders
from howfast.targets.replicas.spec import ReplicaSpec

INSTALL = PgInstall(bindir=Path("/nonexistent"), version="15", source="test")


def _refusals(target: object, *texts: str) -> list[str]:
    return refusals(target, [event_from_text(t) for t in texts])  # type: ignore[arg-type]


def _usable(monkeypatch: pytest.MonkeyPatch) -> None:
    """iptables as usable, whatever this machine has: these tests are about the target."""
    monkeypatch.setattr(packetfilter.PacketFilter, "unusable", lambda self: None)


def test_a_standby_the_design_lacks_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _usable(monkeypatch)
    target = LocalTarget(Path("/mnt/a"), INSTALL, replicas=ReplicaSpec(1, "off"))
    (found,) = _refusals(target, "3s:partition=standby_2")
    assert found == (
        "/mnt/a: event 3s:partition=standby_2: there is no standby_2 to cut off "
        "(the standbys: standby_1)"
    )
    assert _refusals(target, "3s:partition", "5s:partition=standby_1,for=2s") == []


def test_no_standbys_is_refused() -> None:
    (found,) = _refusals(LocalTarget(Path("/mnt/a"), INSTALL), "3s:partition")
    assert "partition needs standbys to cut off (--replicas N): this target has none" in found


def test_a_k8s_target_is_refused_for_now() -> None:
    options = TargetOptions(
        INSTALL,
        kind_options={"k8s": K8sOptions(namespace="bench")},
        design=DesignOptions(replicas=1),
    )
    (target,) = registry.make_targets(["k8s://fast"], options)
    (found,) = _refusals(target, "3s:partition")
    assert "partition is not available on k8s:// targets yet" in found


def test_a_server_uri_is_refused() -> None:
    (target,) = registry.make_targets(["postgresql://u@h/db"], TargetOptions(INSTALL))
    (found,) = _refusals(target, "3s:partition")
    assert "partition needs standbys howfast started on this machine" in found


def test_iptables_missing_or_not_root_is_refused_with_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = LocalTarget(Path("/mnt/a"), INSTALL, replicas=ReplicaSpec(1, "on"))
    monkeypatch.setattr(packetfilter.shutil, "which", lambda name: None)
    monkeypatch.setattr(packetfilter, "CANDIDATES", (Path("/nonexistent/iptables"),))
    (found,) = _refusals(target, "3s:partition")
    assert "iptables is not installed: install it: sudo apt-get install -y iptables" in found
    monkeypatch.setattr(packetfilter.os, "geteuid", lambda: 1000)
    found_program = packetfilter.PacketFilter(Path("/usr/sbin/iptables")).unusable()
    assert found_program is not None and "needs root" in found_program


def test_a_partition_at_or_after_a_failover_is_refused_one_before_it_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _usable(monkeypatch)
    target = LocalTarget(Path("/mnt/a"), INSTALL, replicas=ReplicaSpec(1, "off"))
    assert _refusals(target, "3s:partition", "6s:failover") == []
    (found,) = _refusals(target, "3s:failover", "6s:partition")
    assert "event 6s:partition: after a failover" in found


def test_the_cut_drops_both_ends_of_one_connection_only() -> None:
    rules = packetfilter.cut_rules("HOWFAST-P-0123abcd", Cut("127.0.0.2", 5432))
    assert rules == [
        ["-A", "HOWFAST-P-0123abcd", "-p", "tcp", "-d", "127.0.0.2", "--dport", "5432",
         "-j", "DROP"],
        ["-A", "HOWFAST-P-0123abcd", "-p", "tcp", "-s", "127.0.0.2", "--sport", "5432",
         "-j", "DROP"],
    ]  # fmt: skip
    name = packetfilter.new_chain_name()
    assert packetfilter.is_ours(name) and len(name) <= 28
    assert not packetfilter.is_ours("INPUT") and not packetfilter.is_ours("HOWFAST-P-x; rm")
    with pytest.raises(Exception, match="not a chain name of howfast's"):
        packetfilter.PacketFilter(Path("/bin/false")).remove("DOCKER")


def test_the_listings_are_parsed() -> None:
    listing = (
        "Chain HOWFAST-P-0123abcd (1 references)\n"
        "    pkts      bytes target     prot opt in     out     source               destination\n"
        "      12     2400 DROP       6    --  *      *       0.0.0.0/0            127.0.0.2\n"
        "       3      180 DROP       6    --  *      *       127.0.0.2            0.0.0.0/0\n"
    )
    assert packetfilter.parse_dropped(listing) == 15
    save = (
        "*filter\n:INPUT ACCEPT [0:0]\n:HOWFAST-P-0123abcd - [0:0]\n"
        "-A INPUT -j HOWFAST-P-0123abcd\n-N HOWFAST-P-0123abce\nCOMMIT\n"
    )
    assert packetfilter.chains_in(save) == ["HOWFAST-P-0123abcd", "HOWFAST-P-0123abce"]


def test_each_standby_has_a_loopback_address_of_its_own() -> None:
    assert builders.replication_address(1) == "127.0.0.2"
    assert builders.replication_listen(3) == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    with pytest.raises(ValueError):
        builders.replication_address(0)
    # TCP on loopback asks for a password before initdb's own (trusting) host lines
    assert builders.HBA_FIRST.splitlines()[1:] == [
        "host replication howfast_replication 127.0.0.0/8 scram-sha-256",
        "host replication all 127.0.0.0/8 scram-sha-256",
        "host all all 127.0.0.0/8 scram-sha-256",
    ]


def test_the_scram_verifier_is_the_rfc_one() -> None:
    """RFC 7677's test vector: user's password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096
    iterations: ServerSignature checks the server key; the stored key is H(ClientKey)."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    verifier = builders.scram_verifier("pencil", salt)
    head, keys = verifier.split("$", 1)[1].split("$")
    assert head == "4096:W22ZaJ0SNY7soEsUEjb6gQ=="
    stored, server = (base64.b64decode(k) for k in keys.split(":"))
    auth = (
        b"n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)"
        b"hNlF$k0"
    )
    signature = hmac.new(server, auth, hashlib.sha256).digest()
    assert base64.b64encode(signature).decode() == "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert len(stored) == 32
    assert "'" not in verifier and "pencil" not in builders.replication_role_sql(verifier)


def test_the_passfile_line_escapes_what_libpq_reads_as_separators() -> None:
    line = builders.pgpass_line("127.0.0.2", 5432, "a:b\\c")
    assert line == "127.0.0.2:5432:*:howfast_replication:a\\:b\\\\c\n"


def test_the_registry_names_a_chain_of_howfasts_only() -> None:
    text = (
        '{"writer": {"host": "h", "boot_id": "b", "pid": 1, "start_ticks": 2}}\n'
        '{"iptables_chain": "HOWFAST-P-0123abcd"}\n'
        '{"iptables_chain": "INPUT"}\n'
    )
    record = parse_record(text)
    assert [(i.kind, i.path) for i in record.items] == [("packet filter", "HOWFAST-P-0123abcd")]


def _mark(index: int, text: str, applied: float, **facts: object) -> EventMark:
    spec = event_from_text(text)
    return EventMark(index, spec.text, spec.action, spec.at_s, applied_s=applied,
                     facts=facts)  # type: ignore[arg-type]  # fmt: skip


def test_the_verdict_says_what_the_primary_did_and_what_a_failover_lost_by_it() -> None:
    undo = {"syncrep_waiting_max": 2, "unflushed_bytes_max": 9600, "streaming_again_s": 1.2}
    sync = _mark(1, "3s:partition,for=4s", 3.0, standby="standby_1",
                 before={"sync_state": "sync"}, undo=undo)  # fmt: skip
    line = event_line(EventFigures(mark=sync))
    assert line.startswith("partition of standby_1 for 4 s at 3 s: ")
    assert "commits waited on SyncRep (2 backends at most)" in line
    assert "streaming again 1.2 s after the cut" in line
    async_undo = {"unflushed_bytes_max": 1266664, "lifted_at_load_end_s": 12.1,
                  "streaming_again": "the primary changed during the cut (a failover)"}  # fmt: skip
    cut = _mark(1, "3s:partition", 3.0, standby="standby_1", before={"sync_state": "async"},
                undo=async_undo)  # fmt: skip
    assert "standby_1 up to 1,266,664 bytes of WAL behind" in event_line(EventFigures(mark=cut))
    failover = _mark(2, "6s:failover", 6.0, promoted="standby_1")
    cause = partition_cause(failover, [cut, failover])
    assert cause == (
        "standby_1 was cut off by the partition at 3 s: the commits since never reached it"
    )
    # a cut lifted before the kill explains nothing
    healed = _mark(1, "1s:partition,for=2s", 1.0, standby="standby_1", undo={"lifted_s": 3.0})
    assert partition_cause(failover, [healed, failover]) is None


def _record(state: str, *items: Owned) -> RegistryFile:
    writer = liveness.Writer("host", "boot", 3170, 100, "pid:[1]")
    record = Record("/root/.local/state/howfast/owned/host-3170-100.jsonl", writer, items)
    return RegistryFile(record.path, record, state, items)


def test_cleanup_removes_a_gone_runs_chain_and_leaves_a_live_ones() -> None:
    chain = Owned("packet filter", "HOWFAST-P-0123abcd")
    cluster = Owned("directory", "/mnt/a/howfast-0123abcd", role="cluster")
    (gone,) = find(Snapshot(registry=[_record("gone", cluster, chain)]))
    assert (gone.kind, gone.path, gone.state, gone.removable) == (
        "packet filter", "HOWFAST-P-0123abcd", "gone", True,
    )  # fmt: skip
    assert [a.op for a in gone.actions] == ["remove-packet-filter"]
    (alive,) = find(Snapshot(registry=[_record("alive", chain)]))
    assert alive.state == "in use" and not alive.removable
    # only what the process or the directories asked about made
    assert find(Snapshot(registry=[_record("gone", chain)]), pid=4242) == []
    assert [x.path for x in find(Snapshot(registry=[_record("gone", chain)]), pid=3170)] == [
        "HOWFAST-P-0123abcd"
    ]
    assert find(Snapshot(registry=[_record("gone", cluster, chain)]), scope=["/mnt/b"]) == []
    scoped = find(Snapshot(registry=[_record("gone", cluster, chain)]), scope=["/mnt/a"])
    assert "HOWFAST-P-0123abcd" in [x.path for x in scoped]
