"""An emulated volume as the storage part of a local target (local/dirs.StorageLayer): a
block device howfast builds in the target directory, with added latency and optional I/O
caps (build.Limits), on which the cluster is made.

build(): claim the directory, build the volume, measure what it really adds (a short QD1
write test on the volume and, for the baseline, on the directory itself), create the I/O
cgroup for caps. teardown(): the cgroup, the volume, the claim, the lock, whatever happened.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from pathlib import Path

from howfast.analysis.emulation import latency_warning
from howfast.errors import HowfastError, UsageError
from howfast.hosts.base import Host
from howfast.hosts.local import LocalHost
from howfast.iolimits import throttle_lines
from howfast.machine.cgroup import IoCgroup, detect_io
from howfast.machine.pgbin import PgInstall
from howfast.targets.claim import Claim, check_directory, claim_directory
from howfast.targets.dirlock import DirectoryLock, lock_directory
from howfast.targets.emulated.build import (
    Limits,
    format_ms,
    losetup_argv,
    mkfs_argv,
    mount_argv,
    nbdfuse_argv,
    nbdkit_argv,
)
from howfast.targets.emulated.measure import flush_latency_ms
from howfast.targets.emulated.volume import EmulatedVolume, require_backend
from howfast.targets.leftovers import registry
from howfast.targets.leftovers.marks import write_owner
from howfast.targets.local import check_earlier_clusters
from howfast.targets.local_server import runtime_base
from howfast.targets.osuser import check_reachable, server_user

CHECK_SECONDS = 2
CHECK_FILE_BYTES = 16 * 2**20


def qd1_check_argv(path: Path) -> list[str]:
    """fio's one-I/O-at-a-time 4 KiB direct write test, as JSON: the latency one commit waits."""
    return [
        "fio", "--name=qd1-check", f"--filename={path}", f"--size={CHECK_FILE_BYTES}",
        "--rw=randwrite", "--bs=4k", "--iodepth=1", "--direct=1", "--ioengine=psync",
        f"--runtime={CHECK_SECONDS}", "--time_based", "--lat_percentiles=1",
        "--output-format=json",
    ]  # fmt: skip


def _write_lat(fio_json: str) -> dict[str, object]:
    start = fio_json.find("{")
    lat: dict[str, object] = json.loads(fio_json[start:])["jobs"][0]["write"]["lat_ns"]
    return lat


def write_latency_ms(fio_json: str) -> float:
    """The mean write latency (submission + completion) of fio's first job, in ms."""
    return float(str(_write_lat(fio_json)["mean"])) / 1e6


# The added latency is judged on the 10th percentile of each side's writes, not on their means:
# the delay is under every write on the volume, while a busy machine only adds to a write, and
# adds more on the volume's path (fio, the loop device, nbdfuse and nbdkit's thread each wait
# to be scheduled) than on the plain directory's. Means measured 2.2-2.8 ms added for 2 ms
# asked at a load of 4-6 on a 2-core machine, enough to warn; a low percentile keeps the few
# writes the load did not lengthen, and unlike the minimum it is not one lucky write.
FLOOR_PERCENTILE = "10.000000"


def write_floor_ms(fio_json: str) -> float:
    """The 10th-percentile write latency (submission + completion) of fio's first job, in ms;
    the mean when fio gave no latency percentiles."""
    lat = _write_lat(fio_json)
    percentiles = lat.get("percentile")
    if isinstance(percentiles, dict) and FLOOR_PERCENTILE in percentiles:
        return float(percentiles[FLOOR_PERCENTILE]) / 1e6
    return float(str(lat["mean"])) / 1e6


class VolumeStorage:
    """The volume `limits` asks for, `size_bytes` large, in `workspace` of `directory`."""

    def __init__(
        self,
        directory: Path,
        install: PgInstall,
        limits: Limits,
        size_bytes: int,
        *,
        token: str,
        keep: bool,
    ) -> None:
        self.directory = directory.absolute()
        self.install = install
        self.limits = limits
        self.size_bytes = size_bytes
        self.keep = keep  # refused: the volume, and a cluster on it, go away at the end
        self.token = token
        self.workspace = self.directory / f"howfast-vol-{token}"
        self.emulation: dict[str, object] = {
            "asked_latency_ms": limits.latency_ms,  # added to each read and write
            "asked_flush_latency_ms": limits.latency_ms,  # and to each flush
            "volume": str(self.workspace / "volume.img"),
        }
        self.volume: EmulatedVolume | None = None
        self._io_cgroup: IoCgroup | None = None
        self._claim: Claim | None = None
        self._lock: DirectoryLock | None = None
        self._run_dir: Path | None = None
        self._host: LocalHost | None = None

    def cluster_root(self) -> Path:
        return self.workspace / "mnt"

    def check_inputs(self) -> None:
        """--keep and the directory, read only (targets/base.py): before a run and its dry
        run alike."""
        if self.keep:
            raise UsageError("--keep cannot keep a cluster on an emulated volume: it is removed")
        check_directory(self.directory, "target directory")

    def check(self) -> list[str]:
        backend = require_backend()
        self.emulation["backend"] = backend.name
        if self._lock is None:  # the same lock as a cluster's directory: one run at a time
            self._lock = lock_directory(self.directory, "target directory")
        warnings = check_earlier_clusters(self.directory, "target directory")
        check_reachable(server_user(), self.directory)
        free = shutil.disk_usage(self.directory).free
        if free < self.size_bytes:
            raise UsageError(
                f"the emulated volume ({self.size_bytes // 2**20} MiB) does not fit in "
                f"{self.directory} ({free // 2**20} MiB free)",
                "give a smaller --storage-size",
            )
        if (self.limits.iops or self.limits.bps) and detect_io().version is None:
            raise UsageError(f"--storage-iops needs cgroup I/O limits: {detect_io().reason}")
        return warnings

    def build(self) -> list[str]:
        self._claim = claim_directory(self.directory)
        registry.own_directory(self.workspace, "volume")  # before it exists: howfast cleanup
        self.workspace.mkdir(mode=0o755)
        self._run_dir = Path(
            tempfile.mkdtemp(
                prefix=f"howfast-vol-{self.token}-", dir=runtime_base([self.directory])
            )
        )
        write_owner(self._run_dir, directories=[self.directory], token=self.token)
        self.volume = EmulatedVolume(self.workspace, self._run_dir, self.size_bytes, self.limits)
        self.volume.build()
        warnings = self._measure_added_latency()  # before the caps: the delay alone
        self._create_io_cgroup()
        return warnings

    def io_cgroup(self) -> IoCgroup | None:
        return self._io_cgroup

    def _create_io_cgroup(self) -> None:
        assert self.volume is not None and self.volume.devnum is not None
        support = detect_io()
        lines = throttle_lines(support.version or "v1", self.volume.devnum, self.limits.io_limits())
        if not lines:
            return
        self._io_cgroup = IoCgroup(support, f"howfast-vol-{self.token}", lines)
        self._io_cgroup.create()
        registry.own_cgroup(self._io_cgroup.path)
        if self._host is not None:  # the storage probes run capped too
            self._host.cgroup = self._io_cgroup
        self.emulation["io_limits"] = {"cgroup": str(self._io_cgroup.path), **lines}

    def _measure_added_latency(self) -> list[str]:
        """A short QD1 write test on the volume and on the directory under it: the difference
        is what the volume adds to a write. Both files are removed. Then a few flushes of the
        volume alone, timed: whether the flush is delayed too."""
        assert self.volume is not None
        on_volume, on_volume_p10 = self._qd1_ms(self.volume.mount_dir / ".howfast-qd1-check")
        baseline, baseline_p10 = self._qd1_ms(self.workspace / ".howfast-qd1-check")
        added = max(0.0, on_volume_p10 - baseline_p10)  # FLOOR_PERCENTILE: why not the means
        assert self.volume.loop_device is not None
        self.emulation.update(
            measured_write_latency_ms=round(on_volume, 4),
            baseline_write_latency_ms=round(baseline, 4),
            measured_write_p10_ms=round(on_volume_p10, 4),
            baseline_write_p10_ms=round(baseline_p10, 4),
            measured_added_latency_ms=round(added, 4),
            measured_flush_latency_ms=round(flush_latency_ms(self.volume.loop_device), 4),
        )
        warning = latency_warning(self.limits.latency_ms, added)
        return [warning] if warning else []

    def _qd1_ms(self, path: Path) -> tuple[float, float]:
        """The QD1 check's mean write and its 10th percentile, in ms."""
        assert self.volume is not None
        try:
            out = self.volume.run(qd1_check_argv(path))
            if out.returncode != 0:
                raise HowfastError(f"the QD1 check failed: {out.stderr.strip()[-200:]}")
            return write_latency_ms(out.stdout), write_floor_ms(out.stdout)
        finally:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def host(self) -> Host:
        """This machine; once the volume is capped, tools are born in its I/O cgroup."""
        if self._host is None:
            self._host = LocalHost(self.install, cgroup=self._io_cgroup)
        return self._host

    def device_record(self) -> dict[str, object]:
        return {"emulation": dict(self.emulation)}

    def planned(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The volume's layers, for --dry-run."""
        run_dir = runtime_base([self.directory]) / f"howfast-vol-{self.token}-XXXXXXXX"
        image, mount_dir = self.workspace / "volume.img", self.workspace / "mnt"
        socket = run_dir / "nbdkit.sock"
        nbdkit = nbdkit_argv(
            image, socket, run_dir / "nbdkit.pid", self.limits.latency_ms, run_dir / "nodelay"
        )
        delay = format_ms(self.limits.latency_ms)
        volume: list[tuple[str, list[str]]] = [
            (f"format the {self.size_bytes // 2**20} MiB volume image", mkfs_argv(image)),
            (f"serve it with {delay} added to each read, write and flush", nbdkit),
            ("show it as a file", nbdfuse_argv(run_dir / "fuse", socket, run_dir / "nbdfuse.pid")),
            ("a loop device on that file", losetup_argv(run_dir / "fuse" / "nbd")),
            ("mount it", mount_argv("/dev/loopN", mount_dir)),
        ]
        return tuple((what, tuple(argv)) for what, argv in volume)

    def undelay(self) -> None:
        if self.volume is not None:
            self.volume.undelay()

    def teardown(self) -> None:
        try:
            if self._io_cgroup is not None:
                self._io_cgroup.remove()
                self._io_cgroup = None
        finally:
            self._stop_volume()

    def _stop_volume(self) -> None:
        if self.volume is not None:
            self.volume.teardown()  # raises only when something could not be taken down
            self.volume = None
        if self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)
            self._run_dir = None
        with contextlib.suppress(OSError):
            self.workspace.rmdir()
        if self._claim is not None:
            self._claim.release()
            self._claim = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def note_run(self, run_id: int) -> None:
        if self._lock is not None:
            self._lock.note_run(run_id)
