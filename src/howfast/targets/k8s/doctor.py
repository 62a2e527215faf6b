"""`howfast doctor` on Kubernetes: the cluster of the kubeconfig, its StorageClasses, and what
this user may do in the namespace (SelfSubjectAccessReview). Only when a kubeconfig is there."""

from __future__ import annotations

import os
from pathlib import Path

from howfast.checks import Check

# What a run needs in its namespace: (verb, resource)
NEEDED = (
    ("create", "secrets"),
    ("create", "configmaps"),
    ("create", "persistentvolumeclaims"),
    ("create", "pods"),
    ("create", "pods/exec"),
    ("create", "pods/portforward"),
    ("delete", "pods"),
    ("delete", "persistentvolumeclaims"),
    ("list", "events"),
)


def kubeconfig_present() -> bool:
    paths = os.environ.get("KUBECONFIG")
    if paths:
        return any(Path(p).is_file() for p in paths.split(os.pathsep) if p)
    return (Path.home() / ".kube" / "config").is_file()


def kubernetes_checks(context: str | None = None, namespace: str | None = None) -> list[Check]:
    from howfast.errors import HowfastError
    from howfast.targets.k8s.cluster import Cluster, kubeconfig_namespace

    if not kubeconfig_present():
        return [
            Check(
                "Kubernetes",
                False,
                "no kubeconfig (KUBECONFIG, ~/.kube/config)",
                "k8s:// targets",
                "set KUBECONFIG to benchmark StorageClasses",
            )
        ]
    try:
        cluster = Cluster(context)
        version = cluster.server_version()
        classes = cluster.storage_classes()
    except HowfastError as exc:
        return [Check("Kubernetes", False, str(exc), "k8s:// targets", exc.hint)]
    ns = namespace or kubeconfig_namespace(context) or "default"
    names = []
    for sc in classes:
        annotations = (sc.get("metadata") or {}).get("annotations") or {}
        default = annotations.get("storageclass.kubernetes.io/is-default-class") == "true"
        names.append(
            f"{sc['metadata']['name']} ({sc.get('provisioner')}{', default' if default else ''})"
        )
    denied = [
        f"{verb} {resource}"
        for verb, resource in NEEDED
        if cluster.access(ns, verb, resource) is False
    ]
    checks = [
        Check("Kubernetes", True, f"{cluster.host}, server {version}"),
        Check(
            "StorageClasses",
            bool(classes),
            "; ".join(names) or "none",
            None if classes else "k8s://CLASS targets (k8s://emptyDir still works)",
        ),
        Check(
            f"permissions in namespace {ns}",
            not denied,
            "everything a run needs" if not denied else "denied: " + ", ".join(denied),
            None if not denied else "k8s:// targets in this namespace",
            None if not denied else "bind the Role in deploy/k8s/role.yaml (docs/kubernetes.md)",
        ),
    ]
    return checks
