"""`howfast probe cnpg://CLUSTER[?volume=wal]`: the storage a CloudNativePG cluster runs on,
measured on a NEW volume of its StorageClass (the WAL volume's class with ?volume=wal), in a
pod of howfast's: the k8s:// probe (K8sVolumeTarget), never the cluster's own volumes. The
class is read from the Cluster's claims (else its spec) when the probe is made."""

from __future__ import annotations

from howfast.errors import UsageError
from howfast.targets.base import Target
from howfast.targets.cnpg import discovery as disc
from howfast.targets.cnpg.api import CnpgApi
from howfast.targets.cnpg.spec import parse_target
from howfast.targets.k8s.cluster import Cluster, kubeconfig_namespace
from howfast.targets.k8s.spec import K8sOptions
from howfast.targets.k8s.spec import parse_target as parse_k8s


def probe_class(layout: disc.ClusterLayout, volume: str) -> str:
    """The class to probe; UsageError when the cluster has no such volume or names no
    class (its claims use the cluster's default class: give k8s://CLASS yourself)."""
    classes = disc.storage_classes(layout)
    if volume == "wal" and "wal" not in classes:
        raise UsageError(
            f"Cluster {layout.name} has no WAL volume (spec.walStorage): its WAL is on the "
            "data volume; drop ?volume=wal"
        )
    found = classes.get(volume)
    if not found:
        raise UsageError(
            f"Cluster {layout.name}'s {volume} volumes name no StorageClass (the default "
            "class): probe it as k8s://CLASS"
        )
    return found


def probe_target(text: str, options: K8sOptions) -> Target:
    from dataclasses import replace

    from howfast.targets.k8s.target import K8sVolumeTarget

    spec = parse_target(text)
    if spec.credentials != "auto" or spec.client_node is not None:
        raise UsageError(f"{text}: a probe has no client and uses no credentials: drop them")
    namespace = (
        spec.namespace or options.namespace or (kubeconfig_namespace(options.context) or "default")
    )
    api = CnpgApi(Cluster(options.context))
    obj = api.read_cluster(namespace, spec.cluster)
    layout = disc.layout(obj, [], api.instance_claims(namespace, spec.cluster))
    storage_class = probe_class(layout, spec.volume or "data")
    # the claim's size: a volume like the cluster's (unless --volume-size said otherwise)
    size = layout.wal_size if spec.volume == "wal" else layout.data_size
    if size and options.volume_size == K8sOptions.build().volume_size:
        options = replace(options, volume_size=size)
    return K8sVolumeTarget(
        parse_k8s(f"k8s://{storage_class}"), replace(options, namespace=namespace),
        name=f"{text} ({spec.volume or 'data'} class {storage_class})",
    )  # fmt: skip
