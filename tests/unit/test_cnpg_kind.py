"""The cnpg:// kind: what it makes, what it refuses, and the dry run (every object and
statement, printed without a cluster)."""

from __future__ import annotations

import shlex
from io import StringIO
from pathlib import Path

import pytest

from howfast.design import DesignOptions
from howfast.errors import UsageError
from howfast.machine.pgbin import PgInstall
from howfast.model import StepSpec
from howfast.service.dryrun import plan_document, write_text
from howfast.targets import registry
from howfast.targets.cnpg.target import CnpgTarget
from howfast.targets.kind import OptionContext, RunShape, TargetOptions

INSTALL = PgInstall(bindir=Path("/nonexistent"), version="15", source="test")


def options(values: dict[str, str | None] | None = None, **kw: object) -> TargetOptions:
    texts = ("cnpg://lab/pg",)
    kinds = registry.parse_kind_options(values or {}, OptionContext("run", texts))
    return TargetOptions(INSTALL, kind_options=kinds, **kw)  # type: ignore[arg-type]


def test_a_cnpg_text_is_its_kind_s_and_takes_the_cluster_options() -> None:
    assert registry.kind_for("cnpg://lab/pg").name == "cnpg"
    assert registry.local_install(["cnpg://pg"]) == "none"
    (made,) = registry.make_targets(["cnpg://pg"], options({"namespace": "bench"}))
    assert isinstance(made, CnpgTarget) and made.namespace == "bench"
    (named,) = registry.make_targets(["cnpg://lab/pg"], options({"namespace": "bench"}))
    assert isinstance(named, CnpgTarget) and named.namespace == "lab"  # the text wins


@pytest.mark.parametrize(
    ("values", "kw", "message"),
    [
        ({"image": "x"}, {}, "--image \\(the client runs the cluster's own image\\)"),
        ({"volume_size": "1Gi"}, {}, "--volume-size: not for cnpg://lab/pg"),
        ({}, {"keep": True}, "--keep applies to directory targets"),
        ({}, {"checksums": True}, "--checksums"),
    ],
)
def test_what_has_no_meaning_on_an_operator_s_cluster_is_refused(
    values: dict[str, str | None], kw: dict[str, object], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        registry.make_targets(["cnpg://lab/pg"], options(values, **kw))


def test_a_plan_s_settings_are_not_refused_and_not_applied() -> None:
    from howfast.targets.capabilities import AppliesStepSettings, Restartable

    (made,) = registry.make_targets(["cnpg://lab/pg"], options(settings={"work_mem": "1MB"}))
    assert not isinstance(made, AppliesStepSettings) and not isinstance(made, Restartable)


def test_standbys_of_howfast_s_own_are_refused_and_the_client_node_taken() -> None:
    with pytest.raises(UsageError, match="--replicas: not for cnpg://lab/pg"):
        registry.make_targets(["cnpg://lab/pg"], options(design=DesignOptions(replicas=1)))
    (made,) = registry.make_targets(
        ["cnpg://lab/pg"], options(design=DesignOptions(client_node="n4"))
    )
    assert isinstance(made, CnpgTarget) and made.client_node_asked == "n4"
    with pytest.raises(UsageError, match="--until is not supported with cnpg:// targets"):
        registry.refuse(["cnpg://lab/pg"], RunShape(until=True))
    with pytest.raises(UsageError, match="volume= is for `howfast probe`"):
        registry.make_targets(["cnpg://lab/pg?volume=wal"], options())


def test_the_dry_run_prints_every_object_and_statement_without_a_cluster() -> None:
    (made,) = registry.make_targets(["cnpg://lab/pg"], options())
    assert isinstance(made, CnpgTarget)
    steps = [StepSpec("pgbench", {"mode": "tpcb-like", "clients": 1, "duration_s": 5})]
    document = plan_document([made], steps, INSTALL)
    out = StringIO()
    write_text(document, "howfast run", out)
    text = out.getvalue()
    token = made.token
    statements = (  # printed as shell words, as every start command is
        f'CREATE DATABASE "howfast_{token}"',
        f"COMMENT ON DATABASE \"howfast_{token}\" IS 'howfast: run {token}'",
        f'DROP DATABASE IF EXISTS "howfast_{token}" WITH (FORCE)',
    )
    for expected in (
        *(shlex.quote(statement) for statement in statements),
        "kind: Database",
        "databaseReclaimPolicy: delete",
        f"name: howfast-{token}-client",
        "secretKeyRef",
    ):
        assert expected in text, expected
    assert "password:" not in text.replace("key: password", "")
