"""An emulated volume for one standby (`standby_latency=2ms`): the standby's data on a block
device of its own with added latency on every read, write and flush, which emulates a remote
node's disk (not the network hop to it: docs/replication.md).

It is an EmulatedVolume (volume.py) in a workspace `howfast-vol-TOKEN` of the directory it
is given, with its private directory `howfast-vol-TOKEN-*` beside the primary's, so that
`howfast cleanup` finds what a killed howfast left of it as it finds a target's volume.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import tempfile
from pathlib import Path

from howfast.model import JSONValue
from howfast.targets.emulated.build import Limits
from howfast.targets.emulated.measure import flush_latency_ms
from howfast.targets.emulated.volume import EmulatedVolume, require_backend
from howfast.targets.leftovers import registry
from howfast.targets.leftovers.marks import write_owner
from howfast.targets.local_server import runtime_base


class StandbyVolume:
    """What a LocalStandby asks of its storage (replicas/local.StandbyStorage)."""

    def __init__(self, parent: Path, size_bytes: int, latency_ms: float) -> None:
        self.parent = parent.absolute()
        self.size_bytes = size_bytes
        self.limits = Limits(latency_ms=latency_ms)
        self.token = secrets.token_hex(4)
        self.workspace = self.parent / f"howfast-vol-{self.token}"
        self.volume: EmulatedVolume | None = None
        self.run_dir: Path | None = None
        self.emulation: dict[str, JSONValue] = {
            "asked_latency_ms": latency_ms,
            "asked_flush_latency_ms": latency_ms,
            "volume": str(self.workspace / "volume.img"),
        }

    @property
    def mount_dir(self) -> Path:
        return self.workspace / "mnt"

    def check(self) -> None:
        """Root, nbdkit and the rest (MissingToolError saying what to install)."""
        self.emulation["backend"] = require_backend().name

    def build(self) -> None:
        registry.own_directory(self.workspace, "volume")  # before it exists: howfast cleanup
        self.workspace.mkdir(mode=0o755)
        self.run_dir = Path(
            tempfile.mkdtemp(prefix=f"howfast-vol-{self.token}-", dir=runtime_base([self.parent]))
        )
        write_owner(self.run_dir, directories=[self.parent], token=self.token)
        self.volume = EmulatedVolume(self.workspace, self.run_dir, self.size_bytes, self.limits)
        self.volume.build()
        assert self.volume.loop_device is not None
        measured = flush_latency_ms(self.volume.loop_device)
        self.emulation["measured_flush_latency_ms"] = round(measured, 4)

    def undelay(self) -> None:
        if self.volume is not None:
            self.volume.undelay()

    def set_latency(self, ms: float) -> None:
        if self.volume is not None:
            self.volume.set_latency(ms)
            self.emulation["latency_ms_now"] = ms

    def teardown(self) -> None:
        """Idempotent; raises only when something could not be taken down."""
        if self.volume is not None:
            self.volume.undelay()
            self.volume.teardown()
            self.volume = None
        if self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            self.run_dir = None
        with contextlib.suppress(OSError):
            self.workspace.rmdir()

    def record(self) -> dict[str, JSONValue]:
        return dict(self.emulation)
