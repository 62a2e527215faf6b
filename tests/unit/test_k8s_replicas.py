"""k8s://CLASS?replicas=N (issue 28) before any cluster: the target text, the primary's
replication settings and pg_hba, the objects a dry run lists, and what is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from howfast.design import DesignOptions
from howfast.errors import UsageError
from howfast.machine.pgbin import PgInstall
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s import network as net
from howfast.targets.k8s.spec import K8sOptions, parse_target, with_run_design
from howfast.targets.k8s.standby import WalSender, describe_sender, expected_sync_state
from howfast.targets.k8s.target import K8sTarget
from howfast.targets.kind import TargetOptions
from howfast.targets.kinds.k8s import KIND

OWNER = {"name": "howfast-abc123", "uid": "UID"}
NO_INSTALL = TargetOptions(PgInstall(Path("/nonexistent"), "15.0", "test"))  # k8s needs none


def _plan(text: str, **changes: object) -> m.Plan:
    plan = m.Plan("abc123", "bench", parse_target(text), K8sOptions(), net.SERVER_PORT)
    return replace(plan, **changes)  # type: ignore[arg-type]


def _target(text: str, monkeypatch: pytest.MonkeyPatch, mode: str = "") -> K8sTarget:
    monkeypatch.setenv(net.NETWORK_ENV, mode)
    return K8sTarget(parse_target(text), K8sOptions(namespace="bench"))


def test_the_target_text_gives_standbys_their_level_and_class() -> None:
    spec = parse_target("k8s://fast?replicas=2&sync=remote_apply&standby_class=slow")
    assert (spec.replicas, spec.sync, spec.standby_class) == (2, "remote_apply", "slow")
    assert spec.standby_volume.storage_class == "slow"
    on = parse_target("k8s://fast?replicas=1")
    assert (on.sync, on.standby_volume) == ("on", on.data)  # on by default, same class
    plain = parse_target("k8s://fast")
    assert (plain.replicas, plain.sync, plain.design_keys()) == (0, "off", [])
    assert parse_target("k8s://fast?replicas=0").replicas == 0


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("k8s://a?replicas=-1", "not in the range 0<=x<=8"),
        ("k8s://a?replicas=9", "not in the range 0<=x<=8"),
        ("k8s://a?replicas=two", "is not a number"),
        ("k8s://a?replicas=1&sync=maybe", "is not one of off, local, remote_write"),
        ("k8s://a?sync=on", "sync needs standbys: give ?replicas=N"),
        ("k8s://a?standby_class=b", "standby_class needs standbys"),
        ("k8s://a?replicas=1&standby_class=B_C", "is not a StorageClass name"),
        ("k8s://a?replica=1", "unknown option replica"),
    ],
)
def test_bad_standby_keys_are_refused_with_the_reason(text: str, words: str) -> None:
    with pytest.raises(UsageError, match=words.replace("?", r"\?")):
        parse_target(text)


def test_the_primary_gets_its_replication_settings_in_its_own_configuration() -> None:
    assert m.replication_settings(parse_target("k8s://a"), "10Gi") == {}
    sync = m.replication_settings(parse_target("k8s://a?replicas=2&sync=remote_write"), "1Gi")
    assert sync["synchronous_standby_names"] == "FIRST 2 (standby_1, standby_2)"
    assert sync["synchronous_commit"] == "remote_write"
    assert sync["max_wal_senders"] == sync["max_replication_slots"] == "10"
    assert sync["max_slot_wal_keep_size"] == "256MB"  # a quarter of the volume
    assert (
        m.replication_settings(parse_target("k8s://a?replicas=1"), "100Gi")[
            "max_slot_wal_keep_size"
        ]
        == "4096MB"
    )  # at most 4 GiB
    off = m.replication_settings(parse_target("k8s://a?replicas=1&sync=off"), "10Gi")
    assert "synchronous_standby_names" not in off and "synchronous_commit" not in off
    conf = m.config_map(_plan("k8s://a?replicas=1", settings={"max_wal_senders": "0"}), OWNER)
    text = conf["data"]["postgresql.conf"]
    assert "max_wal_senders = '0'" in text and "max_wal_senders = '10'" not in text  # --set wins


@pytest.mark.parametrize("mode", ["pod", "host"])
def test_the_primary_reads_pg_hba_from_its_config_map_in_both_modes(mode: net.NetworkMode) -> None:
    """hba_file and the file go together (a server with one and not the other does not start)."""
    for remote in (False, True):
        plan = _plan("k8s://a?replicas=1", network=mode, remote_clients=remote, port=41000)
        data = m.config_map(plan, OWNER)["data"]
        assert f"hba_file = '{m.CONFIG_MOUNT}/{net.HBA_KEY}'" in data["postgresql.conf"]
        assert data[net.HBA_KEY] == net.hba_text(mode, remote_clients=remote)
        listen = "*" if mode == "pod" and remote else "127.0.0.1"
        assert f"listen_addresses = '{listen}'" in data["postgresql.conf"]


def test_a_dry_run_lists_the_standby_after_the_primary(monkeypatch: pytest.MonkeyPatch) -> None:
    target = _target("k8s://fast?replicas=1&standby_class=slow", monkeypatch)
    objects = list(target.planned().objects)
    name = f"howfast-{target.token}"
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Secret", name),
        ("ConfigMap", name),
        ("Service", name),
        ("NetworkPolicy", name),
        ("PersistentVolumeClaim", f"{name}-data"),
        ("Pod", name),
        ("ConfigMap", f"{name}-standby-1"),
        ("PersistentVolumeClaim", f"{name}-standby-1-data"),
        ("Pod", f"{name}-standby-1"),
    ]
    assert objects[7]["spec"]["storageClassName"] == "slow"
    primary, standby = objects[5], objects[8]
    assert primary["spec"]["hostname"] == "primary" and primary["spec"]["subdomain"] == name
    env = {e["name"]: e.get("value") for e in standby["spec"]["containers"][0]["env"]}
    assert f"host=primary.{name} port=PORT " in str(env["HOWFAST_PRIMARY"])  # the run's port
    # without standbys a pod-mode primary has no network objects and listens in its pod only
    alone = list(_target("k8s://fast", monkeypatch).planned().objects)
    assert [o["kind"] for o in alone] == [
        "Secret", "ConfigMap", "PersistentVolumeClaim", "Pod",
    ]  # fmt: skip
    assert "listen_addresses = '127.0.0.1'" in alone[1]["data"]["postgresql.conf"]
    assert "hostname" not in alone[3]["spec"] and "subdomain" not in alone[3]["spec"]
    assert alone[3]["metadata"]["labels"][net.ROLE_LABEL] == "primary"


def test_host_mode_puts_every_server_on_the_nodes_network(monkeypatch: pytest.MonkeyPatch) -> None:
    target = _target("k8s://fast?replicas=2", monkeypatch, mode="host")
    objects = list(target.planned().objects)
    assert not [o for o in objects if o["kind"] in ("Service", "NetworkPolicy")]
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert len(pods) == 3
    assert all(p["spec"]["hostNetwork"] is True for p in pods)
    env = {e["name"]: e.get("value") for e in pods[1]["spec"]["containers"][0]["env"]}
    assert "host=127.0.0.1 port=PORT " in str(env["HOWFAST_PRIMARY"])


def test_settings_that_fight_the_design_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    target = _target("k8s://fast?replicas=1&sync=on", monkeypatch)
    target.settings = {"synchronous_standby_names": "*"}
    with pytest.raises(UsageError, match="howfast sets synchronous_standby_names"):
        target.check_design_settings()
    target.settings = {"synchronous_commit": "off"}
    with pytest.raises(UsageError, match=r": sync=on sets synchronous_commit"):
        target.check_design_settings()
    implicit = _target("k8s://fast?replicas=1", monkeypatch)
    implicit.settings = {"synchronous_commit": "off"}  # sync not given: the user's wins
    implicit.check_design_settings()


def test_a_probe_and_a_fleet_refuse_standbys() -> None:
    with pytest.raises(UsageError, match="without a server: drop \\?replicas"):
        KIND.probe_target("k8s://fast?replicas=1", NO_INSTALL)
    with pytest.raises(UsageError, match="no standbys"):
        KIND.fleet("k8s://fast?replicas=1&sync=on", NO_INSTALL)


def test_what_the_primary_says_of_a_standby() -> None:
    assert describe_sender(None) == "not connected to the primary"
    assert describe_sender(WalSender("catchup", "async", 10)) == "catchup (async)"
    assert expected_sync_state("off") == "async"
    assert expected_sync_state("remote_apply") == "sync"


def test_the_runs_replicas_and_sync_apply_where_the_text_says_nothing() -> None:
    run = DesignOptions(replicas=2, sync="remote_write")
    (target,) = KIND.create("k8s://fast", replace(NO_INSTALL, design=run))
    assert isinstance(target, K8sTarget)
    assert (target.spec.replicas, target.spec.sync, target.spec.sync_given) == (
        2, "remote_write", True,
    )  # fmt: skip
    (own,) = KIND.create("k8s://fast?replicas=1&sync=off", replace(NO_INSTALL, design=run))
    assert isinstance(own, K8sTarget)
    assert (own.spec.replicas, own.spec.sync) == (1, "off")  # the text wins
    only = with_run_design(parse_target("k8s://fast"), 1, None)
    assert (only.replicas, only.sync, only.sync_given) == (1, "on", False)
    with pytest.raises(UsageError, match="--sync needs standbys"):
        with_run_design(parse_target("k8s://fast"), None, "on")
    with pytest.raises(UsageError, match="no standbys"):
        KIND.fleet("k8s://fast", replace(NO_INSTALL, design=DesignOptions(replicas=1)))
    KIND.refuse_design("k8s://fast", run)  # taken
    with pytest.raises(UsageError, match="--standby-dir"):
        KIND.refuse_design("k8s://fast", DesignOptions(standby_dirs=(Path("/x"),)))


def test_replicas_on_the_command_line_show_in_the_dry_run(tmp_path: Path) -> None:
    env = {**os.environ, "KUBECONFIG": "/nonexistent", "HOWFAST_STORE": str(tmp_path / "s.db")}
    out = subprocess.run(
        [sys.executable, "-m", "howfast", "run", "quick", "--target", "k8s://fast",
         "--replicas", "1", "--sync", "remote_apply", "--dry-run", "--json"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    (target,) = json.loads(out.stdout)["targets"]
    names = [(o["kind"], o["metadata"]["name"]) for o in target["manifests"]]
    assert ("Pod", f"{names[0][1]}-standby-1") in names
    conf = target["manifests"][1]["data"]["postgresql.conf"]
    assert "synchronous_commit = 'remote_apply'" in conf
