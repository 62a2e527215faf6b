"""`--target k8s://CLASS`: PostgreSQL in a pod on a volume of that StorageClass
(`k8s://CLASS?wal=CLASS2`, `k8s://emptyDir`, `k8s://emptyDir?medium=Memory`); `howfast probe
k8s://CLASS`: a pod on such a volume, without a server; a `[fleet]` plan: one pod per
instance. Every tool runs in the pods, from their images: nothing of PostgreSQL is needed
here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from howfast.checks import Check
from howfast.errors import UsageError
from howfast.targets.base import Target
from howfast.targets.cnpg.spec import SCHEME as CNPG_SCHEME
from howfast.targets.fleet_base import FleetPlace
from howfast.targets.k8s.spec import (
    DEFAULT_FIO_IMAGE,
    DEFAULT_IMAGE,
    DEFAULT_VOLUME_SIZE,
    SCHEME,
    K8sOptions,
)
from howfast.targets.kind import (
    OptionContext,
    OptionSpec,
    RunShape,
    TargetKind,
    TargetOptions,
    refuse_unused,
)


class K8sKind(TargetKind):
    name = "k8s"
    order = 20
    usage = "a k8s://STORAGECLASS"
    option_scope = "k8s:// and cnpg:// targets"
    options = (
        OptionSpec(
            "namespace",
            "--namespace",
            "NS",
            "k8s:// targets: the namespace to create the run's objects in [default: the "
            "kubeconfig context's, else default]. howfast creates no namespace.",
        ),
        OptionSpec(
            "kube_context",
            "--kube-context",
            "NAME",
            "k8s:// targets: the kubeconfig context to use.",
        ),
        OptionSpec(
            "volume_size",
            "--volume-size",
            "SIZE",
            f"k8s:// targets: size of each volume (a quantity) [default: {DEFAULT_VOLUME_SIZE}].",
        ),
        OptionSpec(
            "image",
            "--image",
            "IMAGE",
            "k8s:// targets: the PostgreSQL image (with pgbench, pg_test_fsync) "
            f"[default: {DEFAULT_IMAGE}].",
        ),
        OptionSpec(
            "fio_image",
            "--fio-image",
            "IMAGE",
            f"k8s:// targets: the image fio runs in [default: {DEFAULT_FIO_IMAGE}]; give "
            "--image's when it holds fio (deploy/Dockerfile's does).",
        ),
        OptionSpec("node", "--node", "NODE", "k8s:// targets: run the pod on this node."),
        OptionSpec(
            "cpu",
            "--cpu",
            "CPU",
            "k8s:// targets: the server container's CPU request and limit (e.g. 2, 500m).",
        ),
    )
    local_install = "none"
    # --replicas and --sync (a plan's [design] too), --client pod|same-pod and --client-node
    # (issue 28); ?standby_class= in the text only
    design_keys = frozenset({"replicas", "sync", "client", "client_node"})
    fleet_usage = "a k8s:// StorageClass (one pod each)"
    fleet_example = "--target k8s://CLASS"

    def matches(self, text: str) -> bool:
        return text.startswith(SCHEME)

    def parse_options(
        self, values: Mapping[str, str | None], ctx: OptionContext
    ) -> K8sOptions | None:
        # cnpg:// targets (issue 37) take the same cluster options (--namespace,
        # --kube-context); their kind refuses the ones it has no use for
        if not any(self.matches(text) or text.startswith(CNPG_SCHEME) for text in ctx.targets):
            refuse_unused(self, values)
            return None
        return K8sOptions.build(
            namespace=values.get("namespace"),
            context=values.get("kube_context"),
            volume_size=values.get("volume_size"),
            image=values.get("image"),
            fio_image=values.get("fio_image"),
            node=values.get("node"),
            cpu=values.get("cpu"),
            memory_bytes=ctx.memory_bytes,
        )

    def create(self, text: str, options: TargetOptions) -> list[Target]:
        from howfast.targets.cnpg.made import asks_operator
        from howfast.targets.k8s.spec import client_design, parse_target, with_run_design
        from howfast.targets.k8s.target import K8sTarget

        if asks_operator(text):  # issue 37: a CloudNativePG cluster made on the class
            return [_operator_cluster(text, options)]
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
        design = options.design
        spec = with_run_design(parse_target(text), design.replicas, design.sync)
        client, client_node = client_design(spec, design.client, design.client_node)
        return [
            K8sTarget(
                spec,
                _kube(options),
                settings=options.settings,
                checksums=options.checksums,
                client=client,
                client_node=client_node,
                node_changes_allowed=options.overwrite,  # --yes: a drain may cordon a node
            )
        ]

    def probe_target(self, text: str, options: TargetOptions) -> Target:
        """A pod on a volume of the class (a PVC of --volume-size), deleted after."""
        from howfast.targets.k8s.spec import parse_target
        from howfast.targets.k8s.target import K8sVolumeTarget

        spec = parse_target(text)
        if spec.wal is not None:
            raise UsageError("probe k8s://CLASS probes one class: drop ?wal=")
        if spec.design_keys():
            raise UsageError(
                f"probe k8s://CLASS probes storage, without a server: drop "
                f"?{'&'.join(spec.design_keys())}"
            )
        if options.keep:
            raise UsageError("--keep applies to directories: a probe's volume is always deleted")
        return K8sVolumeTarget(spec, _kube(options))

    def fleet(self, text: str, options: TargetOptions, *, planned: bool = False) -> FleetPlace:
        from howfast.targets.k8s.fleet import K8sFleet
        from howfast.targets.k8s.spec import parse_target

        spec = parse_target(text)
        if spec.design_keys() or options.design.replicas:
            raise UsageError(
                f"{text}: a fleet's instances have no standbys nor client pods (yet): drop "
                f"{'?' + '&'.join(spec.design_keys()) if spec.design_keys() else '--replicas'}"
            )
        if options.design.client == "pod" or options.design.client_node:
            raise UsageError(
                f"{text}: a fleet's instances run pgbench in their own pods (--client same-pod): "
                "drop --client pod and --client-node"
            )
        return K8sFleet(
            spec, _kube(options), settings=options.settings, checksums=options.checksums,
        )  # fmt: skip

    def refuse(self, shape: RunShape) -> None:
        if shape.until:
            raise UsageError(
                "--until is not supported with k8s:// targets (yet): every target's pod would "
                "stay up for the whole run; use --repeat"
            )

    def doctor_checks(self) -> list[Check]:
        """The cluster, its StorageClasses and permissions, when a kubeconfig is present."""
        from howfast.targets.k8s.doctor import kubeconfig_present, kubernetes_checks

        return kubernetes_checks() if kubeconfig_present() else []


def _operator_cluster(text: str, options: TargetOptions) -> Target:
    """k8s://CLASS?operator=cnpg&instances=N&sync=LEVEL: a Cluster made through the operator
    (targets/cnpg/made.py); the design is the text's, the client the cnpg:// target's."""
    from howfast.targets.cnpg.made import parse_made
    from howfast.targets.cnpg.made_target import CnpgMadeTarget

    design = options.design
    if options.wal_dir is not None or options.keep or options.checksums:
        raise UsageError(f"{text}: --wal-dir, --keep and --checksums are not for a cluster the "
                         "operator makes (write ?wal=CLASS2 for a WAL volume)")  # fmt: skip
    if design.replicas is not None:
        raise UsageError(f"{text}: --replicas: the operator's cluster has instances=N (N-1 "
                         "standbys) in the text")  # fmt: skip
    if design.client not in (None, "pod"):
        raise UsageError(f"{text}: --client {design.client}: the client runs in a pod of its own")
    made = CnpgMadeTarget(parse_made(text, design.sync), _kube(options), settings=options.settings)
    if design.client_node:
        made.client_node_asked = design.client_node
    return made


def _kube(options: TargetOptions) -> K8sOptions:
    """The parsed options (K8sOptions.build's defaults without them), with --memory."""
    kube = options.kind_options.get(KIND.name)
    if not isinstance(kube, K8sOptions):
        kube = K8sOptions.build()
    if options.memory_limit is not None and kube.memory_bytes is None:
        kube = replace(kube, memory_bytes=options.memory_limit)
    return kube


KIND = K8sKind()
