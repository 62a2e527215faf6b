"""`--target cnpg://[NAMESPACE/]CLUSTER`: an existing CloudNativePG cluster, benchmarked in a
database of howfast's own through its -rw Service, from a client pod of the cluster's own
image (docs/cloudnative-pg.md); `howfast probe cnpg://CLUSTER`: fio and pg_test_fsync on a
NEW volume of the cluster's StorageClass (`?volume=wal`: of its WAL class), never on the
cluster's volumes. The Kubernetes options are the k8s kind's (--namespace, --kube-context)."""

from __future__ import annotations

from dataclasses import fields

from howfast.errors import UsageError
from howfast.targets.base import Target
from howfast.targets.cnpg.spec import SCHEME
from howfast.targets.k8s.spec import K8sOptions
from howfast.targets.kind import RunShape, TargetKind, TargetOptions

# K8sOptions' fields that mean nothing on a cluster the operator runs (the defaults are
# what K8sOptions.build() gives without them)
_RUN_REFUSED = {
    "volume_size": "--volume-size",
    "image": "--image (the client runs the cluster's own image)",
    "fio_image": "--fio-image",
    "node": "--node (the client's node is --client-node)",
    "cpu": "--cpu",
    "memory_bytes": "--memory",
}


class CnpgKind(TargetKind):
    name = "cnpg"
    order = 15  # before k8s:// (either scheme is distinct; order only sorts messages)
    usage = "a cnpg://[NAMESPACE/]CLUSTER"
    local_install = "none"
    design_keys = frozenset({"client_node"})

    def matches(self, text: str) -> bool:
        return text.startswith(SCHEME)

    def create(self, text: str, options: TargetOptions) -> list[Target]:
        from dataclasses import replace

        from howfast.targets.cnpg.spec import parse_target
        from howfast.targets.cnpg.target import CnpgTarget

        _refuse_local(options)
        # --set and a plan's [settings] are not applied, as on any existing server: the
        # Cluster's configuration is the operator's (the run says the target kept its own)
        if options.checksums:
            raise UsageError(f"{text}: --checksums: the cluster exists, initdb ran long ago")
        kube = _kube(options)
        _refuse_options(kube, _RUN_REFUSED, text)
        spec = parse_target(text)
        if spec.volume is not None:
            raise UsageError(f"{text}: volume= is for `howfast probe` (which volume to probe)")
        if spec.client_node is None and options.design.client_node:
            spec = replace(spec, client_node=options.design.client_node)
        return [CnpgTarget(spec, kube)]

    def probe_target(self, text: str, options: TargetOptions) -> Target:
        """A new volume of the cluster's class, in a pod of howfast's (k8s:// probe)."""
        from howfast.targets.cnpg.probe import probe_target

        _refuse_local(options)
        return probe_target(text, _kube(options))

    def refuse(self, shape: RunShape) -> None:
        if shape.until:
            raise UsageError("--until is not supported with cnpg:// targets (yet): use --repeat")


def _refuse_local(options: TargetOptions) -> None:
    if options.wal_dir is not None:
        raise UsageError("--wal-dir applies to directory targets")
    if options.keep:
        raise UsageError("--keep applies to directory targets: howfast's objects and database "
                         "on a cnpg:// target are always removed")  # fmt: skip


def _kube(options: TargetOptions) -> K8sOptions:
    kube = options.kind_options.get("k8s")
    if not isinstance(kube, K8sOptions):
        kube = K8sOptions.build()
    if options.memory_limit is not None and kube.memory_bytes is None:
        from dataclasses import replace

        kube = replace(kube, memory_bytes=options.memory_limit)
    return kube


def _refuse_options(kube: K8sOptions, refused: dict[str, str], text: str) -> None:
    default = K8sOptions.build()
    given = [
        refused[f.name]
        for f in fields(K8sOptions)
        if f.name in refused and getattr(kube, f.name) != getattr(default, f.name)
    ]
    if given:
        raise UsageError(f"{', '.join(given)}: not for {text} (the operator runs its pods)")


KIND = CnpgKind()
