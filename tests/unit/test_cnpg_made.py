"""k8s://CLASS?operator=cnpg: the text, the Cluster howfast makes through the operator (as
the v1.27.1 API types say), and the kind that makes the target."""

from __future__ import annotations

from pathlib import Path

import pytest

from howfast.design import DesignOptions
from howfast.errors import UsageError
from howfast.machine.pgbin import PgInstall
from howfast.targets import registry
from howfast.targets.cnpg import made as mk
from howfast.targets.cnpg.made_target import CnpgMadeTarget
from howfast.targets.kind import OptionContext, TargetOptions

INSTALL = PgInstall(bindir=Path("/nonexistent"), version="15", source="test")
TEXT = "k8s://fast?operator=cnpg&instances=2&sync=remote_apply&wal=slow"


def test_the_text_and_its_defaults() -> None:
    assert mk.asks_operator(TEXT) and not mk.asks_operator("k8s://fast?replicas=1")
    assert not mk.asks_operator("cnpg://pg")
    made = mk.parse_made(TEXT)
    assert (made.storage_class, made.wal_class, made.instances, made.sync) == (
        "fast", "slow", 2, "remote_apply",
    )  # fmt: skip
    plain = mk.parse_made("k8s://fast?operator=cnpg")
    assert (plain.instances, plain.sync) == (3, "on")
    assert mk.parse_made("k8s://fast?operator=cnpg&instances=1").sync == "off"
    assert mk.parse_made("k8s://fast?operator=cnpg", run_sync="off").sync == "off"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("k8s://fast?operator=zalando", "operator='zalando' is not one of cnpg"),
        ("k8s://fast?operator=cnpg&instances=0", "instances='0' is not a number in 1..9"),
        ("k8s://fast?operator=cnpg&replicas=2", "unknown option replicas"),
        ("k8s://fast?operator=cnpg&instances=1&sync=on", "sync=on needs standbys"),
        ("k8s://fast?operator=cnpg&sync=maybe", "sync='maybe' is not one of"),
        ("k8s://emptyDir?operator=cnpg", "'emptyDir' is not a StorageClass name"),
    ],
)
def test_bad_texts_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        mk.parse_made(text)


def test_the_cluster_is_labelled_owned_and_synchronous_as_asked() -> None:
    made = mk.parse_made(TEXT)
    cluster = mk.cluster_manifest(
        made, "1a2b3c4d", "bench", {"name": "howfast-1a2b3c4d", "uid": "u"},
        {"shared_buffers": "64MB"}, mk.Pods("5Gi", None, "Never"),
    )  # fmt: skip
    assert cluster["apiVersion"] == "postgresql.cnpg.io/v1" and cluster["kind"] == "Cluster"
    assert cluster["metadata"]["name"] == "howfast-1a2b3c4d"
    assert cluster["metadata"]["labels"]["howfast.dev/run"] == "1a2b3c4d"
    assert cluster["metadata"]["ownerReferences"][0]["kind"] == "Secret"
    spec = cluster["spec"]
    assert spec["instances"] == 2 and spec["enableSuperuserAccess"] is True
    assert spec["storage"] == {"storageClass": "fast", "size": "5Gi"}
    assert spec["walStorage"] == {"storageClass": "slow", "size": "5Gi"}
    assert "imageName" not in spec and spec["imagePullPolicy"] == "Never"
    assert spec["postgresql"] == {
        "parameters": {"shared_buffers": "64MB", "synchronous_commit": "remote_apply"},
        "synchronous": {"method": "any", "number": 1, "dataDurability": "required"},
    }
    off = mk.cluster_manifest(
        mk.parse_made("k8s://fast?operator=cnpg&sync=off"), "1a2b3c4d", "bench", None, {},
        mk.Pods("1Gi", "img:17"),
    )  # fmt: skip
    assert "synchronous" not in off["spec"]["postgresql"] and off["spec"]["imageName"] == "img:17"
    assert off["spec"]["postgresUID"] == off["spec"]["postgresGID"] == 999
    assert "postgresUID" not in spec  # the operator's image: its own user


def options(**kw: object) -> TargetOptions:
    kinds = registry.parse_kind_options({}, OptionContext("run", (TEXT,)))
    return TargetOptions(INSTALL, kind_options=kinds, **kw)  # type: ignore[arg-type]


def test_the_k8s_kind_makes_it_and_its_dry_run_shows_the_cluster_first() -> None:
    (made,) = registry.make_targets([TEXT], options(design=DesignOptions(client_node="n2")))
    assert isinstance(made, CnpgMadeTarget) and made.client_node_asked == "n2"
    assert made.spec.cluster == f"howfast-{made.token}"
    kinds = [o["kind"] for o in made.planned().objects]
    assert kinds == ["Secret", "Cluster", "Database"]
    with pytest.raises(UsageError, match="--replicas: the operator's cluster has instances=N"):
        registry.make_targets([TEXT], options(design=DesignOptions(replicas=1)))
