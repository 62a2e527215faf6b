"""Which targets a run request makes, and what each kind refuses of it: the `--target` texts,
the options of some kinds (k8s://'s, an emulated volume's) and the fleet's place.

This is the part of preparing a run that depends on the kinds of target; the run service
(service/run.py) calls nothing else of targets/ to decide by kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from howfast.errors import UsageError
from howfast.machine.cgroup import detect, detect_io, remove_abandoned
from howfast.machine.pgbin import PgInstall, choose_install
from howfast.plans import Plan, parse_int_list
from howfast.plans.fleet import FleetScenario
from howfast.plans.model import MAX_ADDED_LATENCY_MS, StorageSection, too_much_latency
from howfast.service.requests import TargetRunOptions
from howfast.targets.base import Target
from howfast.targets.emulated.build import Limits, variants
from howfast.targets.emulated.target import emulated_variants
from howfast.targets.factory import is_dsn, make_target
from howfast.targets.fleet import LocalFleet
from howfast.targets.fleet_base import FleetPlace
from howfast.targets.k8s.spec import K8sOptions, parse_target
from howfast.targets.kinds.k8s import is_k8s
from howfast.targets.registry import kind_for
from howfast.units import parse_duration, parse_size

# The k8s:// options (cli/k8s_options.py), by their name in TargetRunOptions.kind_values.
K8S_NAMES = ("namespace", "kube_context", "volume_size", "image", "fio_image", "node", "cpu")
DEFAULT_VOLUME_BYTES = 4 * 1024**3  # an emulated volume without --storage-size or [storage]


def has_k8s(texts: Sequence[str]) -> bool:
    """Whether a target is a pod in a Kubernetes cluster (k8s://)."""
    return any(is_k8s(t) for t in texts)


def has_server_here(texts: Sequence[str]) -> bool:
    """Whether a target creates a PostgreSQL cluster on this machine (a directory)."""
    return any(not is_dsn(t) and not is_k8s(t) for t in texts)


def local_install(
    texts: Sequence[str], pg_bin: str | None, info: Callable[[str], None]
) -> PgInstall:
    """The PostgreSQL install whose programs run here; none when every target runs its tools
    in a pod, from its image."""
    if all(is_k8s(t) for t in texts):
        return PgInstall(bindir=Path("/usr/lib/postgresql"), version="", source="none")
    install = choose_install(pg_bin, need_server=has_server_here(texts))
    info(f"using PostgreSQL {install.version} from {install.bindir} ({install.source})")
    return install


def refuse_until(texts: Sequence[str]) -> None:
    """The kinds that cannot stay up for a whole `--until` run."""
    if has_k8s(texts):
        raise UsageError(
            "--until is not supported with k8s:// targets (yet): every target's pod would stay "
            "up for the whole run; use --repeat"
        )


def kubernetes_options(
    values: Mapping[str, str | None], *, has_k8s: bool, memory_bytes: int | None = None
) -> K8sOptions | None:
    """K8sOptions from the request's values; UsageError when given without a k8s:// target."""
    given = sorted(name for name in K8S_NAMES if values.get(name) is not None)
    if not has_k8s:
        if given:
            flags = ", ".join("--" + name.replace("_", "-") for name in given)
            raise UsageError(f"{flags}: for k8s:// targets only")
        return None
    return K8sOptions.build(
        namespace=values.get("namespace"),
        context=values.get("kube_context"),
        volume_size=values.get("volume_size"),
        image=values.get("image"),
        fio_image=values.get("fio_image"),
        node=values.get("node"),
        cpu=values.get("cpu"),
        memory_bytes=memory_bytes,
    )


def storage_variants(
    latency: str | None, iops: str | None, planned: StorageSection | None = None
) -> list[Limits]:
    """--storage-latency x --storage-iops, each a list, else the plan's [storage]; [] when
    neither asks for emulated volumes."""
    if latency is None and iops is None:
        if planned is None:
            return []
        return variants(planned.latency, [cap or None for cap in planned.iops])
    latencies = [0.0]
    if latency is not None:
        latencies = [
            0.0 if v.strip() in ("0", "0ms") else parse_duration(v, "--storage-latency") * 1000
            for v in latency.split(",")
        ]
        for text, ms in zip(latency.split(","), latencies, strict=True):
            if ms > MAX_ADDED_LATENCY_MS:
                raise UsageError(f"--storage-latency: {too_much_latency(text.strip())}")
    caps: list[int | None] = [None]
    if iops is not None:  # 0 (or "none") is a variant without a cap
        caps = [
            None if v.strip() in ("0", "none") else parse_int_list(v, "--storage-iops")[0]
            for v in iops.split(",")
        ]
    return variants(latencies, caps)


def make_targets(
    texts: Sequence[str],
    install: PgInstall,
    options: TargetRunOptions,
    plan: Plan,
    *,
    settings: dict[str, str],
    memory_limit: int | None,
    kubernetes: K8sOptions | None,
) -> list[Target]:
    """A target per text; with --storage-latency/--storage-iops (or the plan's [storage]),
    one per directory and variant."""
    found = storage_variants(
        options.value("storage_latency"), options.value("storage_iops"), plan.storage
    )
    if found and options.wal_dir is not None:
        raise UsageError("--wal-dir cannot be combined with an emulated volume (yet)")
    if found:
        size = options.value("storage_size")
        return emulated_variants(
            list(texts),
            install,
            found,
            size_bytes=parse_size(size, "--storage-size")
            if size
            else (plan.storage.size if plan.storage else DEFAULT_VOLUME_BYTES),
            settings=settings,
            keep=options.keep,
            checksums=options.checksums,
            memory_limit=memory_limit,
        )
    return [
        make_target(
            text,
            install,
            wal_dir=options.wal_dir,
            settings=settings,
            keep=options.keep,
            overwrite=options.overwrite,
            checksums=options.checksums,
            memory_limit=memory_limit,
            kubernetes=kubernetes,
        )
        for text in texts
    ]


def refuse_with_fleet(**given: object) -> None:
    """Options that do not combine with a fleet (yet), each refused by name."""
    named = [name for name, value in given.items() if value]
    if named:
        options = ", ".join(f"--{n.replace('_', '-')}" for n in named)
        raise UsageError(f"a fleet plan cannot be combined with {options} (yet)")


def fleet_place(
    texts: Sequence[str],
    scenarios: Sequence[FleetScenario],
    install: PgInstall,
    settings: dict[str, str],
    checksums: bool,
    kubernetes: K8sOptions | None,
    *,
    dry_run: bool,
) -> FleetPlace:
    """Where the fleet's instances live: subdirectories of a directory, or pods of a cluster;
    UsageError for what the place cannot do with the scenarios (before a dry run too)."""
    kind = kind_for(texts[0]).name if len(texts) == 1 else None
    if kind == "k8s" and kubernetes is not None:
        from howfast.targets.k8s.fleet import K8sFleet, check_classes

        check_classes(list(scenarios))  # no cluster needed to refuse
        return K8sFleet(parse_target(texts[0]), kubernetes, settings=settings,
                        checksums=checksums)  # fmt: skip
    if kind != "local":
        raise UsageError(
            "a fleet runs on one target: a directory (its instances live in subdirectories of "
            "it) or a k8s:// StorageClass (one pod each)",
            "give one --target DIR or --target k8s://CLASS",
        )
    directory = Path(texts[0]).expanduser()
    return LocalFleet(directory, install, settings=settings, checksums=checksums,
                      token="XXXXXXXX" if dry_run else None)  # fmt: skip


def remove_abandoned_cgroups(info: Callable[[str], None]) -> None:
    """The empty cgroups (memory caps, I/O limits and accounting) that a howfast killed with
    SIGKILL left behind: tidied by the runs that make cgroups here."""
    parents = {support.parent for support in (detect(), detect_io())}
    for parent in sorted(p for p in parents if p is not None):
        for path in remove_abandoned(parent):
            info(f"removed {path}: an empty cgroup left by a howfast that was killed")
