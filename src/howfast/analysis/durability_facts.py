"""The facts the durability rules read (analysis/durability.py), gathered from a stored run:
what holds each target's data and WAL (its record's `device`), its settings, its platform,
and the flushes its steps timed. Pure: records in, facts out.

What a record does not hold stays None ("unknown" in the evidence): runs stored before the
device's write cache was recorded, imported runs, servers whose storage howfast cannot see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import Any

from howfast.analysis.durability import (
    SETTINGS,
    Durability,
    DurabilityFacts,
    Flush,
    Medium,
    StepSettings,
    decide,
)
from howfast.model import JSONValue, RunRecord, StepRecord, TargetRecord

MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})
MEMORY_DISKS = ("zram", "ram")  # zram0; ram0 (brd)
NETWORK_FILESYSTEMS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "ceph",
        "glusterfs",
        "fuse.glusterfs",
        "fuse.cephfs",
        "lustre",
        "gpfs",
        "beegfs",
        "fuse.sshfs",
        "afs",
    }
)
NETWORK_DISKS = ("rbd", "nbd", "drbd")  # Ceph RBD, a network block device, DRBD's replication
# The kernel driver or device name of a virtual disk, whose rotational flag is the
# hypervisor's default rather than a fact about the medium (virtio says "rotational").
VIRTUAL_DRIVERS = {"virtio_blk": "a virtio disk", "xen_blkfront": "a Xen disk"}
VIRTUAL_NAMES = {"vd": "a virtio disk", "xvd": "a Xen disk"}
VIRTUAL_MODELS = ("QEMU", "VBOX", "VMware", "Virtual", "PersistentDisk")
# StorageClass provisioners and CSI drivers, by what their volumes are (substrings; local
# ones are looked for first: "openebs.io/local" is local, other OpenEBS engines replicate).
LOCAL_PROVISIONERS = (
    "local-path",
    "no-provisioner",
    "hostpath",
    "host-path",
    "topolvm",
    "openebs.io/local",
    "local.csi",
    "lvm.csi",
    "localpv",
)
NETWORK_PROVISIONERS = (
    "longhorn",
    "ceph",
    "rbd",
    "ebs",
    "pd.csi",
    "gce-pd",
    "azure",
    "nfs",
    "cstor",
    "jiva",
    "mayastor",
    "portworx",
    "linstor",
    "vsphere",
    "cinder",
    "glusterfs",
    "iscsi",
    "alibabacloud",
)
WAL_PROFILE = "wal-fsync"
ONE_CLIENT_SOURCE = "tpcb-like at 1 client (pgbench)"
SERVER_WORKLOADS = ("pgbench", "pgbench-init", "seqread")


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return str(value) if isinstance(value, str) and value else None


def platform_family(text: str | None) -> str | None:
    """'x86_64-pc-linux-gnu', 'Debian GNU/Linux 12' -> 'linux'; 'aarch64-apple-darwin23'
    -> 'macos'; 'x86_64-w64-mingw32', 'windows' -> 'windows'; None when unrecognised."""
    t = (text or "").lower()
    for family, marks in (
        ("linux", ("linux",)),
        ("macos", ("darwin", "apple")),
        ("windows", ("mingw", "windows", "cygwin", "msvc")),
        ("freebsd", ("freebsd",)),
    ):
        if any(m in t for m in marks):
            return family
    return None


def target_platform(target: TargetRecord, environment: Mapping[str, JSONValue]) -> str | None:
    """Where the server ran: this machine for local targets and probes (howfast runs on
    Linux only: it reads /proc), the pod's node, or what an existing server's version() says."""
    if target.kind in ("local", "path"):
        os_name = _str(environment.get("os"))
        return platform_family(os_name) or ("linux" if environment.get("kernel") else None)
    if target.kind == "k8s":
        node = _map(_map(target.device.get("kubernetes")).get("node"))
        return platform_family(_str(node.get("os_image"))) or (
            "linux" if node.get("kernel") else None
        )
    if target.kind == "dsn":
        return platform_family(_str(target.device.get("server_platform")))
    return None


def _virtual(device: Mapping[str, Any]) -> str | None:
    driver = _str(device.get("driver"))
    if driver in VIRTUAL_DRIVERS:
        return VIRTUAL_DRIVERS[driver]
    name = _str(device.get("disk")) or _str(device.get("name")) or ""
    for prefix, what in VIRTUAL_NAMES.items():
        if name.startswith(prefix) and name[len(prefix) :][:1].isalpha():
            return what
    model = _str(device.get("model")) or ""
    if any(m.lower() in model.lower() for m in VIRTUAL_MODELS):
        return f"a virtual disk ({model})"
    return None


def path_medium(role: str, info: Mapping[str, Any], emulated: bool) -> Medium:
    """A role on a directory of this machine (fsinfo.describe_path's record)."""
    fstype = _str(info.get("fstype"))
    device = _map(info.get("device"))
    disk = _str(device.get("disk")) or _str(device.get("name"))
    if fstype in MEMORY_FILESYSTEMS:
        return Medium(role, "memory", fstype or "memory", fstype)
    if disk and disk.startswith(MEMORY_DISKS):
        return Medium(role, "memory", f"{disk}, a block device in RAM", fstype)
    if emulated:
        return Medium(
            role,
            "emulated",
            f"howfast's emulated volume ({disk or '?'})",
            fstype,
            virtual="howfast's emulated volume",
        )
    if fstype in NETWORK_FILESYSTEMS:
        return Medium(role, "network", f"{fstype} {info.get('source') or ''}".strip(), fstype)
    if disk is None:
        return Medium(role, "unknown", f"{fstype or 'a filesystem'} without a block device", fstype)
    if disk.startswith(NETWORK_DISKS):
        return Medium(role, "network", f"{disk}, a network block device", fstype)
    # A loop device's facts are those of the disk under its backing file.
    base, what = device, disk
    for _ in range(4):
        if _str(base.get("backing_fstype")) in MEMORY_FILESYSTEMS:
            return Medium(role, "memory", f"{what}, a loop device on a file in memory", fstype)
        backing = base.get("backing_device")
        if not base.get("loop_backing_file"):
            break
        if not isinstance(backing, Mapping) or not _str(backing.get("name")):
            # Backed by a file on no block device known: the loop's own flags say nothing.
            return Medium(role, "unknown", f"{what}, a loop device on a file", fstype,
                          virtual="a loop device")  # fmt: skip
        base = backing
        what = f"{what} on {backing.get('disk') or backing.get('name')}"
    rotational = base.get("rotational")
    return Medium(
        role,
        "local",
        what,
        fstype,
        rotational=rotational if isinstance(rotational, bool) else None,
        write_cache=_str(base.get("write_cache")),
        virtual=_virtual(base),
    )


def volume_medium(role: str, entry: Mapping[str, Any]) -> Medium:
    """A role on a Kubernetes volume (the k8s target's record)."""
    fstype = _str(entry.get("fstype"))
    kind = _str(entry.get("kind")) or "a volume"
    if entry.get("medium") == "Memory" or fstype in MEMORY_FILESYSTEMS:
        return Medium(role, "memory", f"{kind} ({fstype or 'memory'})", fstype)
    if entry.get("medium") == "disk":
        return Medium(role, "local", kind, fstype)
    sc = _map(entry.get("storage_class"))
    drivers = [d for d in (_str(sc.get("provisioner")), _str(entry.get("csi_driver"))) if d]
    what = f"{kind} ({', '.join(dict.fromkeys(drivers))})" if drivers else kind
    if entry.get("source") in ("local", "hostPath"):
        return Medium(role, "local", what, fstype)
    for markers, verdict in ((LOCAL_PROVISIONERS, "local"), (NETWORK_PROVISIONERS, "network")):
        if any(m in d.lower() for d in drivers for m in markers):
            return Medium(role, verdict, what, fstype)
    if fstype in NETWORK_FILESYSTEMS:
        return Medium(role, "network", what, fstype)
    return Medium(role, "unknown", what, fstype)


def target_media(target: TargetRecord) -> tuple[list[Medium], str | None]:
    """The media of the data and WAL roles, the WAL marked when it shares the data's; or a
    note saying why there are none."""
    device = target.device
    if target.kind == "dsn":
        return [], "an existing server: its storage is out of howfast's sight"
    if target.kind == "import":
        return [], "imported results: the storage was not recorded"
    media: list[Medium] = []
    for role in ("data", "wal"):
        entry = device.get(role)
        if not isinstance(entry, Mapping):
            continue
        if target.kind == "k8s":
            medium = volume_medium(role, entry)
        else:
            medium = path_medium(role, entry, "emulation" in device)
        if role == "wal" and device.get("wal_on_data_device") is True and media:
            medium = Medium(**{**medium.__dict__, "shared_with": "data"})
        media.append(medium)
    return media, None if media else "the target's storage was not recorded"


def _mean_flush(source: str, role: str, values: list[float], bound: bool = False) -> Flush:
    return Flush(source, role, fmean(values), bound, len(values))


def step_flushes(steps: Sequence[StepRecord], settings: Mapping[str, str]) -> list[Flush]:
    """The flush times a target's steps measured: fio's wal-fsync profile (write + fdatasync,
    as the commit ceiling counts it), pg_test_fsync's line for the target's wal_sync_method
    (else fdatasync), both on the data volume; and pgbench tpcb-like at one client, whose
    average latency bounds a WAL flush from above."""
    done = [s for s in steps if s.status == "completed"]
    fio: dict[str, list[float]] = {}
    for s in done:
        params, m = s.all_params, s.metrics
        flushes = params.get("flushes_every_write")
        if s.workload != "fio" or (flushes is not True and params.get("profile") != WAL_PROFILE):
            continue
        sync = _num(m.get("sync_lat_avg_ms"))
        if sync is not None:
            fio.setdefault(f"fio {params.get('profile')}", []).append(
                sync + (_num(m.get("write_lat_avg_ms")) or 0.0)
            )
    out = [_mean_flush(source, "data", values) for source, values in fio.items()]
    method = settings.get("wal_sync_method") or "fdatasync"
    fsync: dict[str, list[float]] = {}
    for s in done:
        if s.workload != "pg_test_fsync":
            continue
        used = method if _num(s.metrics.get(f"{method}_usecs")) is not None else "fdatasync"
        usecs = _num(s.metrics.get(f"{used}_usecs"))
        if usecs is not None:
            fsync.setdefault(f"pg_test_fsync {used}", []).append(usecs / 1000.0)
    out += [_mean_flush(source, "data", values) for source, values in fsync.items()]
    one_client = [
        latency
        for s in done
        if s.workload == "pgbench"
        and s.all_params.get("mode") == "tpcb-like"
        and s.all_params.get("clients") == 1
        and s.all_params.get("warmup") is not True
        and not _flushes_skipped({**settings, **step_settings(s)})
        and (latency := _num(s.metrics.get("latency_avg_ms"))) is not None
    ]
    if one_client:
        out.append(_mean_flush(ONE_CLIENT_SOURCE, "wal", one_client, bound=True))
    return out


def _flushes_skipped(settings: Mapping[str, str]) -> bool:
    return any(
        str(settings.get(n, "")).lower() in ("off", "false", "0")
        for n in ("fsync", "synchronous_commit")
    )


def step_settings(step: StepRecord) -> dict[str, str]:
    """The durability settings a step ran with: what the sampler read from the server
    (`postgres.settings`), else the step's own settings when they were applied."""
    sampled = _map(_map(step.sections.get("postgres")).get("settings"))
    if sampled:
        return {n: str(sampled[n]) for n in SETTINGS if n in sampled}
    params = step.all_params
    asked = _map(params.get("settings"))
    if not asked or params.get("settings_applied") is False:
        return {}
    return {n: str(asked[n]) for n in SETTINGS if n in asked}


def step_label(step: StepRecord) -> str:
    """'tpcb-like at 4 clients', as the why verdicts name a test."""
    p = step.all_params
    if step.workload == "pgbench":
        clients = p.get("clients")
        who = f" at {clients} client{'s' if clients != 1 else ''}" if clients else ""
        return f"{p.get('mode') or 'a custom script'}{who}"
    return step.workload


def target_facts(
    target: TargetRecord, steps: Sequence[StepRecord], environment: Mapping[str, JSONValue]
) -> DurabilityFacts:
    server = target.kind in ("local", "dsn", "k8s") and (
        bool(target.settings) or any(s.workload in SERVER_WORKLOADS for s in steps)
    )
    settings = {n: target.settings[n] for n in SETTINGS if n in target.settings}
    media, note = target_media(target)
    own = []
    for step in steps:
        ran = step_settings(step)
        if server and any(ran.get(n, settings.get(n)) != settings.get(n) for n in ran):
            own.append(StepSettings(str(step.id), step_label(step), {**settings, **ran}))
    return DurabilityFacts(
        target=target.name,
        kind=target.kind,
        server=server,
        settings=settings,
        platform=target_platform(target, environment),
        media=media,
        media_note=note,
        flushes=step_flushes(steps, settings),
        steps=own,
    )


def judge_run(run: RunRecord) -> dict[str, Durability]:
    """Each target's durability. A network volume's flushes are set against the local disks
    of the same run (the fastest local figure from the same source)."""
    facts = []
    for target in run.targets:
        steps = [s for s in run.steps if s.target == target.name]
        facts.append(target_facts(target, steps, run.environment))
    local: dict[str, tuple[str, float]] = {}
    for f in facts:
        own = [m for m in f.media if m.shared_with is None]
        if own and all(m.kind == "local" for m in own):
            for flush in f.flushes:
                if flush.source not in local or flush.ms < local[flush.source][1]:
                    local[flush.source] = (f.target, flush.ms)
    out = {}
    for f in facts:
        if any(m.kind == "network" for m in f.media):
            f.local = {k: v for k, v in local.items() if v[0] != f.target}
        out[f.target] = decide(f)
    return out
