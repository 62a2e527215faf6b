"""The pure builders of a Kubernetes target's objects and its target text."""

from __future__ import annotations

import json

import pytest
import yaml

from howfast.errors import UsageError
from howfast.service.dryrun import to_yaml
from howfast.store import liveness
from howfast.targets.k8s import facts
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s.cleanup import classify
from howfast.targets.k8s.spec import K8sOptions, VolumeSpec, parse_target


def _plan(text: str = "k8s://fast", **options: object) -> m.Plan:
    return m.Plan(
        token="abc123",
        namespace="bench",
        spec=parse_target(text),
        options=K8sOptions(**options),  # type: ignore[arg-type]
        port=5555,
        settings={"shared_buffers": "128MB"},
    )


def test_parse_target() -> None:
    spec = parse_target("k8s://fast-ssd?wal=local-nvme")
    assert spec.data == VolumeSpec("fast-ssd") and spec.wal == VolumeSpec("local-nvme")
    assert parse_target("k8s://emptyDir?medium=Memory").data == VolumeSpec(None, "Memory")
    assert parse_target("k8s://emptyDir").data == VolumeSpec(None, "")
    for bad in ("k8s://", "k8s://Fast", "k8s://a?size=1", "k8s://a?medium=Memory"):
        with pytest.raises(UsageError):
            parse_target(bad)


def test_every_object_is_labelled_and_owned_by_the_secret() -> None:
    objects = m.all_manifests(_plan("k8s://fast?wal=slow"))
    assert [o["kind"] for o in objects] == [
        "Secret", "ConfigMap", "PersistentVolumeClaim", "PersistentVolumeClaim", "Pod",
    ]  # fmt: skip
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert {k: labels[k] for k in (m.MANAGED_BY, m.RUN_LABEL)} == {
            m.MANAGED_BY: "howfast",
            m.RUN_LABEL: "abc123",
        }
        assert obj["metadata"]["namespace"] == "bench"
    assert objects[-1]["metadata"]["labels"]["howfast.dev/role"] == "primary"
    for obj in objects[1:]:
        (ref,) = obj["metadata"]["ownerReferences"]
        assert ref["kind"] == "Secret" and ref["name"] == "howfast-abc123"
    claims = {o["metadata"]["name"]: o["spec"]["storageClassName"] for o in objects[2:4]}
    assert claims == {"howfast-abc123-data": "fast", "howfast-abc123-wal": "slow"}
    assert "--waldir=/howfast/wal/pg_wal" in objects[1]["data"]["start.sh"]


def test_pod_passes_the_restricted_standard_and_keeps_the_password_out_of_argv() -> None:
    pod = m.pod(_plan(cpu="2", memory_bytes=2**30, node="n1"), {"name": "o", "uid": "u"})
    spec = pod["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "hostNetwork" not in spec and spec["automountServiceAccountToken"] is False
    for container in spec["containers"]:
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert "password" not in " ".join(container["command"]).lower()
    server = spec["containers"][0]
    assert server["resources"] == {
        "requests": {"cpu": "2", "memory": "1024Mi"},
        "limits": {"cpu": "2", "memory": "1024Mi"},
    }
    assert server["env"][0]["valueFrom"]["secretKeyRef"]["name"] == "howfast-abc123"
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n1"]


def test_empty_dir_targets_and_probes() -> None:
    objects = m.all_manifests(_plan("k8s://emptyDir?medium=Memory"))
    assert "PersistentVolumeClaim" not in [o["kind"] for o in objects]
    data = objects[-1]["spec"]["volumes"][0]
    assert data["emptyDir"] == {"sizeLimit": "10Gi", "medium": "Memory"}
    probe = m.Plan("t", "ns", parse_target("k8s://fast"), K8sOptions(), "PORT", server=False)
    kinds = [o["kind"] for o in m.all_manifests(probe)]
    assert kinds == ["Secret", "PersistentVolumeClaim", "Pod"]
    names = [c["name"] for c in m.all_manifests(probe)[-1]["spec"]["containers"]]
    assert names == ["tools", "fio"]  # fio's own image by default


def test_yaml_round_trip() -> None:
    objects = m.all_manifests(_plan())
    text = to_yaml(objects)  # as --dry-run prints them
    assert list(yaml.safe_load_all(text)) == objects
    assert "start.sh: |" in text


def test_settings_are_quoted_for_postgresql() -> None:
    assert m.conf_text({"a": "it's"}) == "# set by howfast\na = 'it''s'\n"


def test_facts() -> None:
    node = {
        "metadata": {"name": "n", "labels": {"topology.kubernetes.io/zone": "z1"}},
        "status": {"nodeInfo": {"kernelVersion": "6.1"}, "allocatable": {"cpu": "3500m"}},
    }
    assert facts.node_facts(node)["labels"] == {"topology.kubernetes.io/zone": "z1"}
    assert facts.cpu_cores("3500m") == 3 and facts.cpu_cores("100m") == 1
    sc = {"metadata": {"name": "x"}, "provisioner": "p", "reclaimPolicy": "Delete"}
    assert facts.storage_class_facts(sc)["provisioner"] == "p"


def test_cleanup_classifies_writers() -> None:
    here = liveness.this_process()
    assert classify(None, here)[0] == "gone"
    alive = here.document()
    assert classify(json.dumps(alive), here)[0] == "running"
    gone = {**alive, "pid": 2**22 + 7}
    assert classify(json.dumps(gone), here)[0] == "gone"
    elsewhere = {**alive, "host": "another-machine"}
    assert classify(json.dumps(elsewhere), here)[0] == "unknown"


def _waiting(reason: str, message: str) -> dict[str, object]:
    return {
        "status": {
            "phase": "Pending",
            "containerStatuses": [
                {
                    "name": "postgres",
                    "image": "pg",
                    "state": {"waiting": {"reason": reason, "message": message}},
                }
            ],
        }
    }


def test_a_refused_container_configuration_is_a_problem_unless_the_kubelet_retries_it():
    from howfast.targets.k8s.cluster import pod_problem

    refused = pod_problem(_waiting("CreateContainerConfigError", 'secret "x" not found'))
    assert refused is not None and "configuration is refused" in refused
    # The kubelet's secret cache lagging behind the pod's binding: it retries by itself.
    lagging = "failed to sync secret cache: timed out waiting for the condition"
    assert pod_problem(_waiting("CreateContainerConfigError", lagging)) is None
