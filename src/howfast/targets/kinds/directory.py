"""`--target DIR`: a throwaway cluster that howfast creates in a directory it owns; with
`--storage-latency`/`--storage-iops` (or the plan's `[storage]`), one cluster per variant on
an emulated volume built in the directory. `howfast probe DIR`: the directory's storage
alone. A `[fleet]` plan: instances in subdirectories, each in its own I/O cgroup."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from howfast.checks import Check
from howfast.design import DesignOptions, merge_design, split_design_query
from howfast.errors import UsageError
from howfast.plans.model import (
    MAX_ADDED_LATENCY_MS,
    StorageSection,
    parse_int_list,
    too_much_latency,
)
from howfast.redact import redact_dsn
from howfast.targets.base import Target
from howfast.targets.emulated.build import Limits, format_ms, variants
from howfast.targets.fleet_base import FleetPlace
from howfast.targets.kind import Command, OptionContext, OptionSpec, TargetKind, TargetOptions
from howfast.units import parse_duration, parse_size

DEFAULT_VOLUME_BYTES = 4 * 1024**3
RUN: frozenset[Command] = frozenset({"run"})
# What `DIR?key=value&...` may say (docs/replication.md)
DESIGN_KEYS = frozenset({"replicas", "sync", "standby_dir", "standby_latency", "client"})


def local_client(design: DesignOptions) -> Literal["socket", "tcp"]:
    """--client for a cluster on this machine: socket (the default) or tcp."""
    if design.client in ("pod", "same-pod"):
        raise UsageError(
            f"--client {design.client} is for k8s:// targets (directory targets: socket or tcp)"
        )
    return "tcp" if design.client == "tcp" else "socket"


def split_directory(text: str) -> tuple[str, DesignOptions]:
    """`/data/a?replicas=1&sync=on` -> ('/data/a', its design); UsageError for a key a
    directory target does not take."""
    return split_design_query(text, DESIGN_KEYS)


@dataclass(frozen=True)
class DirectoryOptions:
    """The emulated volumes asked for: one target per directory and variant."""

    variants: tuple[Limits, ...] = ()  # empty: a cluster on the directory itself
    size_bytes: int = DEFAULT_VOLUME_BYTES
    # The options a fleet refuses, as given: "--storage-latency" (or the plan's [storage])
    fleet_refused: tuple[str, ...] = ()


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


class DirectoryKind(TargetKind):
    name = "local"
    order = 1000  # the fallback: any text that is not a URI
    usage = "a directory"
    option_scope = "directory targets"
    options = (
        OptionSpec(
            "storage_latency",
            "--storage-latency",
            "2ms|0,1ms,2ms",
            "Put each directory target's cluster on an emulated volume with this much added "
            "latency per read, write and flush (0.5ms works); a list runs one variant per "
            "value. Needs root.",
            RUN,
        ),
        OptionSpec(
            "storage_iops",
            "--storage-iops",
            "N|500,20000",
            "Cap the emulated volume's read and write IOPS (each); a list runs one variant "
            "per value. Needs root and cgroup I/O limits.",
            RUN,
        ),
        OptionSpec(
            "storage_size",
            "--storage-size",
            "SIZE",
            "Size of the emulated volume, a sparse file in the target directory [default: "
            "the plan's [storage] size, else 4GiB].",
            RUN,
        ),
    )
    local_install = "server"
    design_keys = DESIGN_KEYS
    fleet_usage = "a directory (its instances live in subdirectories of it)"
    fleet_example = "--target DIR"

    def matches(self, text: str) -> bool:
        return "://" not in text

    def parse_options(
        self, values: Mapping[str, str | None], ctx: OptionContext
    ) -> DirectoryOptions | None:
        latency, iops = values.get("storage_latency"), values.get("storage_iops")
        planned = ctx.plan.storage if ctx.plan is not None else None
        found = storage_variants(latency, iops, planned)
        for text in ctx.targets if found else ():
            if "://" in text or "=" in text:
                raise UsageError(
                    "--storage-latency/--storage-iops need directory targets: "
                    f"{redact_dsn(text)} is a server, storage howfast does not build",
                )
        size = values.get("storage_size")
        size_bytes = (
            parse_size(size, "--storage-size")
            if size
            else (planned.size if planned else DEFAULT_VOLUME_BYTES)
        )
        refused = (("--storage-latency",) if latency or planned else ()) + (
            ("--storage-iops",) if iops else ()
        )
        if not any(self.matches(text) for text in ctx.targets):
            return None
        return DirectoryOptions(tuple(found), size_bytes, refused)

    def create(self, text: str, options: TargetOptions) -> list[Target]:
        from howfast.targets.local import LocalOptions, LocalTarget, StandbyPlacement
        from howfast.targets.replicas.spec import replica_spec

        storage = _storage(options)
        path, own = split_directory(text)
        design = merge_design(own, options.design)
        replicas = replica_spec(design, options.settings)
        client = local_client(design)
        directory = Path(path).expanduser()
        standby_dirs = [d.expanduser() for d in design.standby_dirs]
        name = f"{directory.absolute()} with {replicas.describe()}" if replicas else None
        standby_storage = None
        latency = design.standby_latency_ms
        if replicas is not None and latency is not None:
            from howfast.targets.emulated.standby_volume import StandbyVolume

            if latency > MAX_ADDED_LATENCY_MS:
                raise UsageError(f"standby_latency: {too_much_latency(format_ms(latency))}")
            size = storage.size_bytes

            def standby_storage(parent: Path) -> StandbyVolume:
                return StandbyVolume(parent, size, latency)

            name = f"{name}, standby +{format_ms(latency)}"
        if not storage.variants:
            return [
                LocalTarget(
                    directory,
                    options.install,
                    settings=options.settings,
                    replicas=replicas,
                    options=LocalOptions(
                        wal_dir=options.wal_dir,
                        keep=options.keep,
                        checksums=options.checksums,
                        name=name,
                        memory_limit=options.memory_limit,
                        client=client,
                    ),
                    standbys=StandbyPlacement(dirs=tuple(standby_dirs), storage=standby_storage),
                )
            ]
        if standby_dirs:
            raise UsageError(
                "--standby-dir cannot be combined with an emulated volume (yet): the standbys "
                "live on the primary's volume"
            )
        if options.wal_dir is not None:
            raise UsageError("--wal-dir cannot be combined with an emulated volume (yet)")
        from howfast.targets.emulated.target import EmulatedTarget  # not for a plain directory

        return [
            EmulatedTarget(
                directory,
                options.install,
                limits,
                size_bytes=storage.size_bytes,
                settings=options.settings,
                keep=options.keep,
                options=LocalOptions(
                    checksums=options.checksums, memory_limit=options.memory_limit, client=client
                ),
                replicas=replicas,
                standby_storage=standby_storage,
            )
            for limits in storage.variants
        ]

    def probe_target(self, text: str, options: TargetOptions) -> Target:
        from howfast.targets.path import PathTarget

        if split_directory(text)[1].given():
            raise UsageError(
                f"{text}: howfast probe measures storage; standbys (?replicas=) are for howfast run"
            )
        return PathTarget(Path(text).expanduser(), install=options.install, keep=options.keep)

    def fleet(self, text: str, options: TargetOptions, *, planned: bool = False) -> FleetPlace:
        from howfast.targets.fleet import LocalFleet

        refused = [
            *_storage(options).fleet_refused,
            *(["--memory"] if options.memory_limit else []),
        ]
        if refused:
            raise UsageError(f"a fleet plan cannot be combined with {', '.join(refused)} (yet)")
        return LocalFleet(
            Path(text).expanduser(),
            options.install,
            settings=options.settings,
            checksums=options.checksums,
            token="XXXXXXXX" if planned else None,
        )

    def doctor_checks(self) -> list[Check]:
        from howfast.targets.local_doctor import local_checks

        return local_checks()

    def housekeeping(self) -> list[str]:
        """The empty cgroups (memory caps, I/O limits and accounting) that a howfast killed
        with SIGKILL left behind."""
        from howfast.machine.cgroup import detect, detect_io, remove_abandoned

        parents = {support.parent for support in (detect(), detect_io())}
        return [
            f"removed {path}: an empty cgroup left by a howfast that was killed"
            for parent in sorted(p for p in parents if p is not None)
            for path in remove_abandoned(parent)
        ]


def _storage(options: TargetOptions) -> DirectoryOptions:
    parsed = options.kind_options.get(KIND.name)
    return parsed if isinstance(parsed, DirectoryOptions) else DirectoryOptions()


KIND = DirectoryKind()
