"""`--client pod|same-pod` and `--client-node` for `k8s://` targets (issue 28 item 4): the
choice and its refusals, the dry run that shows the client pod apart from the server's, and
the runner that gives pgbench the client's host. The lab runs it for real
(tests/k8s/test_replicas.py, tests/k8s/test_client.py)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from howfast.design import DesignOptions
from howfast.errors import UsageError
from howfast.machine.pgbin import PgInstall
from howfast.model import StepSpec
from howfast.runner.step import client_placement
from howfast.service.dryrun import plan_document, write_text
from howfast.targets import registry
from howfast.targets.capabilities import ClientPlacement
from howfast.targets.k8s.spec import K8sOptions, client_design, parse_target
from howfast.targets.k8s.target import K8sTarget
from howfast.targets.kind import TargetOptions

INSTALL = PgInstall(bindir=Path("/nonexistent"), version="15", source="test")
KUBE = K8sOptions(namespace="bench")


def _made(text: str, **design: str) -> K8sTarget:
    options = TargetOptions(INSTALL, kind_options={"k8s": KUBE}, design=DesignOptions(**design))  # type: ignore[arg-type]
    (target,) = registry.make_targets([text], options)
    assert isinstance(target, K8sTarget)
    return target


def test_a_client_pod_is_the_default_and_same_pod_keeps_the_servers() -> None:
    default = _made("k8s://fast")
    assert (default.client_mode, default.client_node) == ("pod", None)
    pinned = _made("k8s://fast", client_node="node-b")
    assert (pinned.client_mode, pinned.client_node) == ("pod", "node-b")
    same = _made("k8s://fast", client="same-pod")
    assert (same.client_mode, same.client_node) == ("same-pod", None)


def test_the_targets_query_wins_over_the_options() -> None:
    target = _made("k8s://fast?client=same-pod", client="pod")
    assert target.client_mode == "same-pod"
    target = _made("k8s://fast?client_node=node-a", client_node="node-b")
    assert target.client_node == "node-a"
    spec = parse_target("k8s://fast?replicas=1&client=pod&client_node=node-a")
    assert (spec.client, spec.client_node, spec.replicas) == ("pod", "node-a", 1)


@pytest.mark.parametrize("local", ["socket", "tcp"])
def test_local_placements_are_refused_on_k8s_with_the_k8s_ones_named(local: str) -> None:
    with pytest.raises(UsageError, match=f"--client {local} is for directory targets.*same-pod"):
        _made("k8s://fast", client=local)
    with pytest.raises(UsageError, match=f"client={local} is for directory targets"):
        parse_target(f"k8s://fast?client={local}")


def test_a_client_node_with_same_pod_is_refused() -> None:
    with pytest.raises(UsageError, match=r"--client-node places a client pod.*same-pod"):
        _made("k8s://fast", client="same-pod", client_node="node-b")
    with pytest.raises(UsageError, match="--client-node places a client pod"):
        client_design(parse_target("k8s://fast?client=same-pod&client_node=n"), None, None)
    with pytest.raises(UsageError, match="is not a node name"):
        parse_target("k8s://fast?client_node=Not_A_Node")


def test_probes_and_fleets_refuse_a_client_pod() -> None:
    options = TargetOptions(INSTALL, kind_options={"k8s": KUBE})
    with pytest.raises(UsageError, match=r"without a server: drop \?client$"):
        registry.probe_target("k8s://fast?client=pod", options)
    fleet = TargetOptions(
        INSTALL, kind_options={"k8s": KUBE}, design=DesignOptions(client_node="node-b")
    )
    with pytest.raises(UsageError, match="fleet's instances run pgbench in their own pods"):
        registry.fleet_place(["k8s://fast"], fleet, planned=True)


def test_the_dry_run_shows_the_client_pod_apart_and_pgbench_running_in_it() -> None:
    target = _made("k8s://fast", client_node="node-b")
    steps = [
        StepSpec("fio", {"profile": "wal-fsync", "size_bytes": 2**24, "runtime_s": 2}),
        StepSpec("pgbench", {"mode": "select-only", "clients": 2, "duration_s": 5}),
    ]
    document = plan_document([target], steps, INSTALL)
    (planned,) = document["targets"]  # type: ignore[index]
    pod = f"howfast-{target.token}"
    assert [m["metadata"]["name"] for m in planned["manifests"] if m["kind"] == "Pod"] == [pod]
    client = planned["client"]
    assert (client["placement"], client["node"], client["host"]) == (
        "pod", "node-b", f"pod {pod}-client",
    )  # fmt: skip
    (manifest,) = client["manifests"]
    assert manifest["metadata"]["name"] == f"{pod}-client"
    required = manifest["spec"]["affinity"]["nodeAffinity"]
    assert "node-b" in str(required)
    fio, pgbench = planned["steps"]
    assert fio["host"] == "pod" and pgbench["host"] == f"pod {pod}-client"
    # pgbench dials the primary's address on the pod network, not the server's loopback
    argvs = [inv["argv"] for inv in pgbench["invocations"] if "argv" in inv]
    assert argvs and all(f"primary.{pod}" in argv for argv in argvs), argvs
    text = io.StringIO()
    write_text(document, "howfast run", text)
    printed = text.getvalue()
    assert f"# the client: pgbench and the round-trip probe run in pod {pod}-client" in printed
    assert f"# runs in pod {pod}-client" in printed
    assert printed.index(f"name: {pod}-client") > printed.index("kind: PersistentVolumeClaim")


def test_same_pod_plans_no_client_pod() -> None:
    target = _made("k8s://fast", client="same-pod")
    steps = [StepSpec("pgbench", {"mode": "select-only", "clients": 2, "duration_s": 5})]
    (planned,) = plan_document([target], steps, INSTALL)["targets"]  # type: ignore[index]
    assert planned["client"] is None
    assert all(not m["metadata"]["name"].endswith("-client") for m in planned["manifests"])
    assert planned["steps"][0]["host"] == "pod"


def test_the_runner_gives_pgbench_the_client_pods_host_and_fio_the_servers() -> None:
    target = _made("k8s://fast")

    class Placed(K8sTarget):
        def client(self) -> ClientPlacement:
            return placement

    placed = Placed(target.spec, KUBE, client="pod")
    client_host = K8sTarget(target.spec, KUBE, client="pod").host()
    conn = placed._planned_connection()
    assert conn is not None
    placement = ClientPlacement(client_host, conn, {"placement": "pod"})
    assert client_placement(placed, "pgbench", conn) is placement
    assert client_placement(placed, "pgbench-init", conn) is placement
    assert client_placement(placed, "fio", conn) is None
    assert client_placement(placed, "pgbench", None) is None


def test_howfasts_own_sql_stays_on_its_connection_when_the_load_dials_a_pod_name() -> None:
    """A client pod dials `primary.howfast-T`, which this machine cannot resolve: sizes,
    checkpoints and pgbench_history counts go through howfast's own connection."""
    from howfast.targets.base import Connection
    from howfast.workloads.base import StepContext

    target = _made("k8s://fast")
    load = Connection(f"primary.howfast-{target.token}", 5432, "howfast", "postgres", "pw")
    own = Connection("127.0.0.1", 41000, "howfast", "postgres", "pw")
    ctx = StepContext(target, load, INSTALL, Path("/w"), target.host(), sql=own)
    assert ctx.server() == load and ctx.sql_connection() == own
    plain = StepContext(target, load, INSTALL, Path("/w"), target.host())
    assert plain.sql_connection() == load


def test_compare_says_when_two_runs_placed_their_client_differently() -> None:
    """A k8s:// run made before the client pod (no `client`: in the server's pod) against
    one with a client pod: a difference that matters, as is a pod on another node against
    one on the server's; two local runs of old and new records are not told apart."""
    from howfast.analysis.envdiff import target_differences
    from howfast.model import TargetRecord

    def k8s(client: dict[str, object]) -> TargetRecord:
        return TargetRecord(name="k8s://fast", kind="k8s", client=client)  # type: ignore[arg-type]

    apart = {"placement": "pod", "same_node": False}
    found = {d.field: d for d in target_differences(0, [k8s({}), k8s(apart)])}
    diff = found["client placement"]
    assert diff.values == ("same-pod", "pod (on another node)") and diff.matters
    together = {"placement": "pod", "same_node": True}
    assert "client placement" in {
        d.field for d in target_differences(0, [k8s(together), k8s(apart)])
    }
    assert not [d for d in target_differences(0, [k8s(apart), k8s(apart)]) if "client" in d.field]
    local_old = TargetRecord(name="/mnt/a", kind="local")
    local_new = TargetRecord(name="/mnt/a", kind="local", client={"placement": "socket"})
    assert not [d for d in target_differences(0, [local_old, local_new]) if "client" in d.field]
