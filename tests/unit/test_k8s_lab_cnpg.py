"""The lab's pure builders for the CloudNativePG operator (tests/k8s/lab/cnpg.py, cnpg_record.py):
the release manifest adapted to the lab (on the Deployment of the real release manifest), the
Cluster object, and the masking of secrets before a recording is saved."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.k8s.lab import cnpg, cnpg_record, config

DATA = Path(__file__).resolve().parents[1] / "data" / "cnpg" / "v1.27.1"
SERVICE = """---
apiVersion: v1
kind: Service
metadata: {name: cnpg-webhook-service, namespace: cnpg-system}
spec:
  ports: [{port: 443, targetPort: 9443}]
"""


def _release() -> str:
    return (DATA / "release-deployment.yaml").read_text() + SERVICE


def test_the_operator_runs_the_labs_image_never_pulled_and_copies_it_into_instances() -> None:
    objects = cnpg.operator_objects(_release())
    assert [o["kind"] for o in objects] == ["Deployment", "Service"]
    (container,) = objects[0]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == config.CNPG_IMAGE
    assert container["imagePullPolicy"] == "Never"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["OPERATOR_IMAGE_NAME"] == config.CNPG_IMAGE
    assert not any("ghcr.io" in json.dumps(o) for o in objects)
    # no CPU limit; the memory limit and the requests stay as released
    assert "cpu" not in container["resources"]["limits"]
    assert container["resources"]["limits"]["memory"] == "200Mi"
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "100Mi"}
    # the rest is left as released
    assert objects[1]["spec"] == {"ports": [{"port": 443, "targetPort": 9443}]}
    assert container["securityContext"]["runAsUser"] == cnpg.OPERATOR_UID


def test_the_cluster_runs_the_labs_postgresql_image_as_its_postgres_user() -> None:
    obj = cnpg.cluster_object("lab-disk")
    assert obj["metadata"] == {"name": "pg", "namespace": "lab"}
    spec = obj["spec"]
    assert spec["instances"] == 2
    # the operator reads the major version from the tag: it must start with it
    assert spec["imageName"] == config.PG_IMAGE
    assert spec["imageName"].rsplit(":", 1)[1].split(".")[0] == "15"
    assert (spec["postgresUID"], spec["postgresGID"]) == (config.PG_UID, config.PG_GID)
    assert spec["storage"] == {"storageClass": "lab-disk", "size": "1Gi"}


@pytest.mark.parametrize(
    ("status", "healthy"),
    [
        ({"phase": cnpg.HEALTHY, "readyInstances": 2}, True),
        ({"phase": cnpg.HEALTHY, "readyInstances": 1}, False),
        ({"phase": "Failing over", "readyInstances": 2}, False),
        ({}, False),
    ],
)
def test_healthy_means_the_phase_and_every_instance_ready(
    status: dict[str, object], healthy: bool
) -> None:
    assert cnpg.is_healthy(status, 2) is healthy


def test_secrets_keep_names_and_keys_and_lose_every_value() -> None:
    password = "s3cret-Passw0rd"
    uri = f"postgresql://app:{password}@pg-rw.lab:5432/app"
    listing = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "kind": "Secret",
                "type": "kubernetes.io/basic-auth",
                "metadata": {
                    "name": "pg-app",
                    "labels": {"cnpg.io/cluster": "pg"},
                    "annotations": {
                        "kubectl.kubernetes.io/last-applied-configuration": password,
                        "cnpg.io/operatorVersion": "1.27.1",
                    },
                },
                "data": {
                    "password": base64.b64encode(password.encode()).decode(),
                    "uri": base64.b64encode(uri.encode()).decode(),
                },
            }
        ],
    }
    masked, values = cnpg_record.masked_secrets(listing)
    (secret,) = masked["items"]
    assert secret["metadata"]["name"] == "pg-app"
    assert secret["metadata"]["annotations"] == {"cnpg.io/operatorVersion": "1.27.1"}
    assert secret["data"] == {
        "password": cnpg_record.PLACEHOLDER,
        "uri": cnpg_record.PLACEHOLDER,
    }
    assert password in values and uri in values
    assert password not in json.dumps(masked)
    assert base64.b64decode(cnpg_record.PLACEHOLDER) == b"placeholder"
