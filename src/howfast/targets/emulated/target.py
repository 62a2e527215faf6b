"""A local target on an emulated volume: the cluster lives on a block device howfast builds in
the target directory, with added latency and optional I/O caps (build.Limits).

start(): claim the directory, build the volume, measure what it really adds (a short QD1
write test on the volume and, for the baseline, on the directory itself), create the I/O
cgroup for caps, then start a LocalTarget on the volume. stop(): the cluster, the cgroup,
the volume, the claim, in that order, whatever happened.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from howfast.analysis.emulation import latency_warning
from howfast.errors import HowfastError, UsageError
from howfast.hosts.base import Host
from howfast.hosts.local import LocalHost
from howfast.iolimits import throttle_lines
from howfast.machine.cgroup import IoCgroup, MemoryCgroup, detect_io
from howfast.machine.pgbin import PgInstall
from howfast.machine.serverio import ServerIo
from howfast.model import JSONValue, TargetRecord
from howfast.targets.base import Connection, PlannedTarget, Target
from howfast.targets.capabilities import (
    AppliesStepSettings,
    ClientPlacement,
    Crashable,
    HasClient,
    HasCurrentPrimary,
    HasLocalServer,
    HasLocalStandbys,
    HasServerIdentity,
    HasServerLog,
    HasStandbys,
    HasStorage,
    HoldsDirectoryLock,
    IoCappable,
    Promotable,
    Restartable,
    ServerIdentity,
    StandbyMember,
    StorageSlowable,
)
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
from howfast.targets.local import LocalClient, LocalTarget, check_earlier_clusters
from howfast.targets.local_server import runtime_base
from howfast.targets.osuser import check_reachable, server_user
from howfast.targets.replicas.local import StandbyStorage
from howfast.targets.replicas.spec import ReplicaSpec

CHECK_SECONDS = 2
CHECK_FILE_BYTES = 16 * 2**20


def qd1_check_argv(path: Path) -> list[str]:
    """fio's one-I/O-at-a-time 4 KiB direct write test, as JSON: the latency one commit waits."""
    return [
        "fio", "--name=qd1-check", f"--filename={path}", f"--size={CHECK_FILE_BYTES}",
        "--rw=randwrite", "--bs=4k", "--iodepth=1", "--direct=1", "--ioengine=psync",
        f"--runtime={CHECK_SECONDS}", "--time_based", "--output-format=json",
    ]  # fmt: skip


def write_latency_ms(fio_json: str) -> float:
    """The mean write latency (submission + completion) of fio's first job, in ms."""
    start = fio_json.find("{")
    job = json.loads(fio_json[start:])["jobs"][0]["write"]
    return float(job["lat_ns"]["mean"]) / 1e6


class EmulatedTarget(
    Target,
    HasStorage,
    HasServerLog,
    HasLocalServer,
    Restartable,
    Crashable,
    HasServerIdentity,
    IoCappable,
    StorageSlowable,
    AppliesStepSettings,
    HoldsDirectoryLock,
    HasStandbys,
    HasLocalStandbys,
    HasCurrentPrimary,
    Promotable,
    HasClient,
):
    kind = "local"

    def __init__(
        self,
        directory: Path,
        install: PgInstall,
        limits: Limits,
        *,
        size_bytes: int,
        settings: dict[str, str],
        keep: bool = False,
        checksums: bool = False,
        memory_limit: int | None = None,
        replicas: ReplicaSpec | None = None,
        standby_storage: Callable[[Path], StandbyStorage] | None = None,
        client: LocalClient = "socket",
    ) -> None:
        self.directory = directory.absolute()
        self.install = install
        self.limits = limits
        self.size_bytes = size_bytes
        self.name = f"{self.directory} {limits.describe()}"
        if replicas is not None:  # its standbys live on the same volume, inside the cluster
            self.name += f" with {replicas.describe()}"
        self.token = secrets.token_hex(4)
        self.workspace = self.directory / f"howfast-vol-{self.token}"
        self.inner = LocalTarget(
            self.workspace / "mnt",
            install,
            settings=settings,
            keep=False,  # the volume goes away at the end: a kept cluster would go with it
            checksums=checksums,
            name=self.name,
            memory_limit=memory_limit,
            replicas=replicas,
            standby_storage=standby_storage,
            standby_volume_root=self.directory,  # beside this volume, not on it
            client=client,
        )
        self.keep = keep
        self.warnings: list[str] = []
        self.emulation: dict[str, object] = {
            "asked_latency_ms": limits.latency_ms,  # added to each read and write
            "asked_flush_latency_ms": limits.latency_ms,  # and to each flush
            "volume": str(self.workspace / "volume.img"),
        }
        self.volume: EmulatedVolume | None = None
        self.io_cgroup: IoCgroup | None = None
        self._claim: Claim | None = None
        self._lock: DirectoryLock | None = None
        self._run_dir: Path | None = None
        self._host: LocalHost | None = None

    def check_inputs(self) -> None:
        """--keep and the directory, read only (targets/base.py): before a run and its dry
        run alike."""
        if self.keep:
            raise UsageError("--keep cannot keep a cluster on an emulated volume: it is removed")
        check_directory(self.directory, "target directory")

    def check(self, *, will_init: bool) -> None:
        self.check_inputs()
        backend = require_backend()
        self.emulation["backend"] = backend.name
        if self._lock is None:  # the same lock as a cluster's directory: one run at a time
            self._lock = lock_directory(self.directory, "target directory")
        self.warnings = check_earlier_clusters(self.directory, "target directory")
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

    def start(self) -> Connection:
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
        self._measure_added_latency()  # before the caps: it measures the delay alone
        self._create_io_cgroup()
        self.inner.io_cgroup = self.io_cgroup
        self.inner.check(will_init=True)
        connection = self.inner.start()
        self.warnings += self.inner.warnings
        return connection

    def _create_io_cgroup(self) -> None:
        assert self.volume is not None and self.volume.devnum is not None
        support = detect_io()
        lines = throttle_lines(support.version or "v1", self.volume.devnum, self.limits.io_limits())
        if not lines:
            return
        self.io_cgroup = IoCgroup(support, f"howfast-vol-{self.token}", lines)
        self.io_cgroup.create()
        registry.own_cgroup(self.io_cgroup.path)
        if self._host is not None:  # the storage probes run capped too
            self._host.cgroup = self.io_cgroup
        self.emulation["io_limits"] = {"cgroup": str(self.io_cgroup.path), **lines}

    def _measure_added_latency(self) -> None:
        """A short QD1 write test on the volume and on the directory under it: the difference
        is what the volume adds to a write. Both files are removed. Then a few flushes of the
        volume alone, timed: whether the flush is delayed too."""
        assert self.volume is not None
        on_volume = self._qd1_ms(self.volume.mount_dir / ".howfast-qd1-check")
        baseline = self._qd1_ms(self.workspace / ".howfast-qd1-check")
        added = max(0.0, on_volume - baseline)
        assert self.volume.loop_device is not None
        self.emulation.update(
            measured_write_latency_ms=round(on_volume, 4),
            baseline_write_latency_ms=round(baseline, 4),
            measured_added_latency_ms=round(added, 4),
            measured_flush_latency_ms=round(flush_latency_ms(self.volume.loop_device), 4),
        )
        warning = latency_warning(self.limits.latency_ms, added)
        if warning:
            self.warnings.append(warning)

    def _qd1_ms(self, path: Path) -> float:
        assert self.volume is not None
        try:
            out = self.volume.run(qd1_check_argv(path))
            if out.returncode != 0:
                raise HowfastError(f"the QD1 check failed: {out.stderr.strip()[-200:]}")
            return write_latency_ms(out.stdout)
        finally:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def host(self) -> Host:
        """This machine; once the volume is capped, tools are born in its I/O cgroup."""
        if self._host is None:
            self._host = LocalHost(self.install, cgroup=self.io_cgroup)
        return self._host

    def start_warnings(self) -> tuple[str, ...]:
        return tuple(self.warnings)

    def record(self) -> TargetRecord:
        record = self.inner.record()
        device = {**record.device, "emulation": dict(self.emulation)}
        return dataclasses.replace(record, location=str(self.directory), device=device)

    def stop(self) -> None:
        if self.volume is not None:  # measured or interrupted: nothing waits out a delay now
            self.volume.undelay()
        try:
            self.inner.stop()
        finally:
            try:
                if self.io_cgroup is not None:
                    self.io_cgroup.remove()
                    self.io_cgroup = None
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

    # What the steps and samplers need comes from the cluster on the volume.
    def alive(self) -> bool:
        return self.inner.alive()

    def server_log_tail(self, lines: int = 20) -> str | None:
        return self.inner.server_log_tail(lines)

    def scratch_dir(self) -> Path | None:
        return self.inner.scratch_dir()

    def storage_paths(self) -> dict[str, Path]:
        return self.inner.storage_paths()

    def standbys(self) -> Sequence[StandbyMember]:
        return self.inner.standbys()

    def standby_storage_paths(self) -> dict[str, Path]:
        return self.inner.standby_storage_paths()

    def client(self) -> ClientPlacement:
        return self.inner.client()

    def server_log_file(self) -> Path | None:
        return self.inner.server_log_file()

    # failover: the server's, on the inner target (its standbys)
    def promotable_standbys(self) -> tuple[str, ...]:
        return self.inner.promotable_standbys()

    def failover_refusal(self) -> str | None:
        return self.inner.failover_refusal()

    def connection_now(self) -> Connection:
        return self.inner.connection_now()

    def client_connection_now(self, follow: bool = False) -> Connection:
        return self.inner.client_connection_now(follow)

    def fail_over(self, standby: str) -> Mapping[str, JSONValue]:
        return self.inner.fail_over(standby)

    def restore_design(self) -> Mapping[str, JSONValue] | None:
        return self.inner.restore_design()

    def restart(self) -> Mapping[str, JSONValue]:
        return self.inner.restart()

    def crash(self) -> Mapping[str, JSONValue]:
        return self.inner.crash()

    def server_identity(self) -> ServerIdentity:
        return self.inner.server_identity()

    def added_latency_ms(self) -> float:
        assert self.volume is not None
        return self.volume.latency_ms

    def set_added_latency(self, ms: float) -> None:
        """The volume's delay, changed while the server runs (slow-storage events)."""
        if self.volume is None:
            raise HowfastError("the emulated volume is not built")
        self.volume.set_latency(ms)

    def measure_flush_ms(self, n: int = 5) -> float:
        """The median of `n` flushes of the volume's loop device now (nothing to write)."""
        if self.volume is None or self.volume.loop_device is None:
            raise HowfastError("the emulated volume is not built")
        return flush_latency_ms(self.volume.loop_device, n)

    def cap_iops(self, iops: int | None) -> Mapping[str, JSONValue]:
        return self.inner.cap_iops(iops)  # the volume's cgroup, its own limits restored after

    def server_iops_since(self, t: float) -> float | None:
        return self.inner.server_iops_since(t)

    def memory_cgroup(self) -> MemoryCgroup | None:
        return self.inner.memory_cgroup()

    def server_io(self) -> ServerIo | None:
        return self.inner.server_io()

    def planned(self) -> PlannedTarget:
        """The volume's layers, then the cluster's commands, for --dry-run."""
        run_dir = runtime_base([self.directory]) / f"howfast-vol-{self.token}-XXXXXXXX"
        image, mount_dir = self.workspace / "volume.img", self.workspace / "mnt"
        socket = run_dir / "nbdkit.sock"
        volume: list[tuple[str, list[str]]] = [
            (f"format the {self.size_bytes // 2**20} MiB volume image", mkfs_argv(image)),
            (
                f"serve it with {format_ms(self.limits.latency_ms)} added to each read, "
                "write and flush",
                nbdkit_argv(
                    image,
                    socket,
                    run_dir / "nbdkit.pid",
                    self.limits.latency_ms,
                    run_dir / "nodelay",
                ),
            ),
            ("show it as a file", nbdfuse_argv(run_dir / "fuse", socket, run_dir / "nbdfuse.pid")),
            ("a loop device on that file", losetup_argv(run_dir / "fuse" / "nbd")),
            ("mount it", mount_argv("/dev/loopN", mount_dir)),
        ]
        cluster = self.inner.planned()
        return PlannedTarget(
            host=self.host(),
            connection=cluster.connection,
            scratch_dir=cluster.scratch_dir,
            start=(*((what, tuple(argv)) for what, argv in volume), *cluster.start),
        )

    def apply_step_settings(self, settings: Mapping[str, str]) -> None:
        self.inner.apply_step_settings(settings)
