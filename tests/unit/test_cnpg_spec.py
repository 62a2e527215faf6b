"""cnpg://[NAMESPACE/]CLUSTER parsing: names, the query, clear errors."""

from __future__ import annotations

import pytest

from howfast.errors import UsageError
from howfast.targets.cnpg.spec import parse_target


def test_a_cluster_alone_leaves_the_namespace_to_the_options() -> None:
    spec = parse_target("cnpg://pg")
    assert (spec.cluster, spec.namespace, spec.credentials) == ("pg", None, "auto")
    assert spec.in_namespace("default") == "default"


def test_a_namespace_before_the_cluster() -> None:
    spec = parse_target("cnpg://lab/pg?credentials=app&client_node=n3")
    assert (spec.namespace, spec.cluster, spec.credentials, spec.client_node) == (
        "lab", "pg", "app", "n3",
    )  # fmt: skip
    assert spec.in_namespace("default") == "lab"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cnpg://", "no Cluster named"),
        ("cnpg://a/b/c", "more than NAMESPACE/CLUSTER"),
        ("cnpg://Lab/pg", "'Lab' is not a namespace name"),
        ("cnpg://lab/PG", "'PG' is not a Cluster name"),
        ("cnpg://pg?credential=app", "unknown option credential \\(did you mean credentials\\?\\)"),
        ("cnpg://pg?credentials=root", "credentials='root' is not one of auto, app, superuser"),
        ("cnpg://pg?volume=tmp", "volume='tmp' is not one of data, wal"),
        ("cnpg://pg?client_node=Bad_Node", "client_node='Bad_Node' is not a node name"),
    ],
)
def test_bad_texts_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_target(text)
