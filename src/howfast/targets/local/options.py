"""What a local target is asked to be: its options, grouped (the constructor stays short)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # an annotation: the standbys' code is loaded only by a run that has them
    from howfast.targets.replicas.local import StandbyStorage

LocalClient = Literal["socket", "tcp"]
SUPERUSER = "howfast"
TCP_ADDRESS = "127.0.0.1"  # --client tcp: loopback only


@dataclass(frozen=True)
class LocalOptions:
    """The cluster's options beyond its directory, install, settings and standbys."""

    wal_dir: Path | None = None  # --wal-dir: the WAL on other storage
    keep: bool = False  # --keep: left stopped at the end, not removed
    checksums: bool = False  # initdb --data-checksums
    name: str | None = None  # the target's name in reports (its directory by default)
    memory_limit: int | None = None  # --memory: the server runs in a capped cgroup
    # --client tcp: pgbench reaches the server over 127.0.0.1 with a password
    client: LocalClient = "socket"


@dataclass(frozen=True)
class StandbyPlacement:
    """Where `--replicas` standbys go: in `dirs` (one for all, or one each), else in the
    cluster directory; on storage of their own (`storage`, standby_latency) made in their
    directory, else in `volume_root` (an emulated target's directory, around this cluster's
    volume), else in the target's directory."""

    dirs: tuple[Path, ...] = ()
    storage: Callable[[Path], StandbyStorage] | None = None
    volume_root: Path | None = None


DEFAULTS = LocalOptions()
IN_THE_CLUSTER = StandbyPlacement()  # the standbys' default place
