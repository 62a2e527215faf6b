"""`--target k8s://CLASS`: PostgreSQL in a pod on a volume of that StorageClass (to come)."""

from __future__ import annotations

from howfast.errors import UsageError
from howfast.targets.base import Target
from howfast.targets.registry import TargetKind, TargetOptions


class K8sKind(TargetKind):
    name = "k8s"
    order = 20

    def matches(self, text: str) -> bool:
        return text.startswith("k8s://")

    def create(self, text: str, options: TargetOptions) -> Target:
        raise UsageError("Kubernetes targets (k8s://CLASS) are not supported yet")


KIND = K8sKind()
