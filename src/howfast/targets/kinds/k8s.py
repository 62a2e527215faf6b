"""`--target k8s://CLASS`: PostgreSQL in a pod on a volume of that StorageClass
(`k8s://CLASS?wal=CLASS2`, `k8s://emptyDir`, `k8s://emptyDir?medium=Memory`)."""

from __future__ import annotations

from howfast.errors import UsageError
from howfast.targets.base import Target
from howfast.targets.kind import TargetKind, TargetOptions

SCHEME = "k8s://"


class K8sKind(TargetKind):
    name = "k8s"
    order = 20
    usage = "a k8s://STORAGECLASS"

    def matches(self, text: str) -> bool:
        return text.startswith(SCHEME)

    def create(self, text: str, options: TargetOptions) -> Target:
        from dataclasses import replace

        from howfast.targets.k8s.spec import K8sOptions, parse_target
        from howfast.targets.k8s.target import K8sTarget

        if options.wal_dir is not None:
            raise UsageError(
                "--wal-dir applies to directory targets; for WAL on another StorageClass "
                "write k8s://CLASS?wal=CLASS2"
            )
        if options.keep:
            raise UsageError(
                "--keep applies to directory targets: a Kubernetes target's objects are always "
                "deleted at the end"
            )
        kube = options.kubernetes or K8sOptions.build()
        if options.memory_limit is not None and kube.memory_bytes is None:
            kube = replace(kube, memory_bytes=options.memory_limit)
        return K8sTarget(
            parse_target(text), kube, settings=options.settings, checksums=options.checksums
        )


def is_k8s(text: str) -> bool:
    return text.startswith(SCHEME)


KIND = K8sKind()
