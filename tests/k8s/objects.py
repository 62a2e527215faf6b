"""Kubernetes objects the lab tests create by hand (pure builders), and a small poller."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from tests.k8s.lab.cluster import ClusterFacts

RESTRICTED = "restricted"
T = TypeVar("T")


def restricted_namespace(name: str) -> dict[str, Any]:
    """A namespace that enforces the restricted Pod Security Standard at the latest version."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {
                "pod-security.kubernetes.io/enforce": RESTRICTED,
                "pod-security.kubernetes.io/enforce-version": "latest",
            },
        },
    }


def claim(
    ns: str, storage_class: str, size: str = "1Gi", access_mode: str = "ReadWriteOnce"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": ns},
        "spec": {
            "accessModes": [access_mode],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": size}},
        },
    }


PG_START = """set -eu
if [ ! -f "$PGDATA/PG_VERSION" ]; then
  initdb -D "$PGDATA" -U postgres --auth=trust >/dev/null
fi
exec postgres -D "$PGDATA" -c listen_addresses=127.0.0.1 -c unix_socket_directories=/tmp \\
  -c shared_buffers=64MB -c jit=off -c max_wal_size=256MB
"""


def pg_pod(ns: str, facts: ClusterFacts, node: str | None = None) -> dict[str, Any]:
    """PostgreSQL on claim "data", as the restricted standard wants it: non-root,
    RuntimeDefault seccomp, no capability, no privilege escalation; its own network namespace
    (hostNetwork is forbidden). `node`: the node it must run on (through the scheduler)."""
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pg", "namespace": ns},
        "spec": {
            "automountServiceAccountToken": False,
            "dnsPolicy": "Default",
            "terminationGracePeriodSeconds": 5,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": facts.pg_uid,
                "runAsGroup": facts.pg_gid,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "pg",
                    "image": facts.pg_image,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/bash", "-c", PG_START],
                    "env": [{"name": "PGDATA", "value": "/data/pgdata"}],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "readinessProbe": {
                        "exec": {"command": ["pg_isready", "-h", "127.0.0.1", "-U", "postgres"]},
                        "periodSeconds": 1,
                    },
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    }
    if node is not None:
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return pod


def wait_for(what: str, check: Callable[[], T], timeout: float = 60) -> T:
    """Poll `check()` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.5)
