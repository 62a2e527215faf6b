"""Where pgbench runs on a `k8s://` target (issue 28 item 4): what is refused before anything
is created. A client pod on the other node, with a standby, runs end to end in
tests/k8s/test_replicas.py (test_a_sync_standby_streams_is_recorded_and_costs_tps)."""

from __future__ import annotations

import pytest

from tests.k8s.conftest import Kube, TwoNodes, lab_images, leftovers, run_howfast
from tests.k8s.lab.cluster import ClusterFacts

pytestmark = pytest.mark.k8s


def test_bad_client_placements_are_refused_before_anything_is_created(
    k8s_lab: ClusterFacts, kube: Kube, two_nodes: TwoNodes, howfast_env: dict[str, str]
) -> None:
    target = f"k8s://{two_nodes.shared_storage_class}"
    unknown = run_howfast(
        howfast_env, "run", "quick", "--target", target, "--client-node", "no-such-node",
        *lab_images(k8s_lab), check=False,
    )  # fmt: skip
    assert unknown.returncode == 2, unknown.stderr
    assert "--client-node no-such-node: the cluster has no such node" in unknown.stderr
    assert two_nodes.first in unknown.stderr and two_nodes.second in unknown.stderr
    for args, said in (
        (("--client", "socket"), "--client socket is for directory targets"),
        (("--client", "same-pod", "--client-node", two_nodes.second), "--client-node places"),
    ):
        refused = run_howfast(
            howfast_env, "run", "quick", "--target", target, *args, *lab_images(k8s_lab),
            check=False,
        )  # fmt: skip
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
    assert leftovers(kube) == {}
