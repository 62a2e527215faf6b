"""A local target on an emulated volume: a LocalTarget whose storage part is the volume
(storage.py), which howfast builds in the target directory before the cluster and takes down
after it; the cluster (and its standbys) live on the volume."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

from howfast.errors import HowfastError
from howfast.machine.pgbin import PgInstall
from howfast.targets.capabilities import StorageSlowable
from howfast.targets.emulated.build import Limits
from howfast.targets.emulated.measure import flush_times_ms
from howfast.targets.emulated.storage import (
    CHECK_FILE_BYTES,
    CHECK_SECONDS,
    VolumeStorage,
    qd1_check_argv,
    write_latency_ms,
)
from howfast.targets.local import LocalOptions, LocalTarget, StandbyPlacement
from howfast.targets.local.options import DEFAULTS
from howfast.targets.replicas.local import StandbyStorage
from howfast.targets.replicas.spec import ReplicaSpec

__all__ = [
    "CHECK_FILE_BYTES",
    "CHECK_SECONDS",
    "EmulatedTarget",
    "qd1_check_argv",
    "write_latency_ms",
]


class EmulatedTarget(LocalTarget, StorageSlowable):
    """What the volume adds to a local target: its delay, changed and measured live."""

    def __init__(
        self,
        directory: Path,
        install: PgInstall,
        limits: Limits,
        *,
        size_bytes: int,
        settings: dict[str, str],
        keep: bool = False,
        options: LocalOptions = DEFAULTS,
        replicas: ReplicaSpec | None = None,
        standby_storage: Callable[[Path], StandbyStorage] | None = None,
    ) -> None:
        """`options`: the cluster's (checksums, memory_limit, client); its name is the
        volume's, and `keep` is refused (the volume goes away at the end)."""
        directory = directory.absolute()
        name = f"{directory} {limits.describe()}"
        if replicas is not None:  # its standbys live on the same volume, inside the cluster
            name += f" with {replicas.describe()}"
        self.volume_part = VolumeStorage(
            directory, install, limits, size_bytes, token=secrets.token_hex(4), keep=keep
        )
        super().__init__(
            directory,
            install,
            settings=settings,
            replicas=replicas,
            options=LocalOptions(
                checksums=options.checksums,
                name=name,
                memory_limit=options.memory_limit,
                client=options.client,
            ),
            # beside this volume, not on it
            standbys=StandbyPlacement(storage=standby_storage, volume_root=directory),
            storage=self.volume_part,
        )
        self.limits = limits
        self.workspace = self.volume_part.workspace
        self.takeover.primary_latency_ms = limits.latency_ms  # after a failover (takeover.py)

    def added_latency_ms(self) -> float:
        assert self.volume_part.volume is not None
        return self.volume_part.volume.latency_ms

    def set_added_latency(self, ms: float) -> None:
        """The volume's delay, changed while the server runs (slow-storage events)."""
        if self.volume_part.volume is None:
            raise HowfastError("the emulated volume is not built")
        self.volume_part.volume.set_latency(ms)

    def measure_flush_ms(self, n: int = 9) -> float:
        """The shortest of `n` flushes of the volume's loop device now (nothing to write)."""
        volume = self.volume_part.volume
        if volume is None or volume.loop_device is None:
            raise HowfastError("the emulated volume is not built")
        return min(flush_times_ms(volume.loop_device, n))
