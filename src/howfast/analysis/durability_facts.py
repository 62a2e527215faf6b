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
from howfast.analysis.hooks import evidence_of, verdict_label
from howfast.model import JSONValue, RunRecord, StepRecord, TargetRecord
from howfast.plugin.registry import find

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
ONE_CLIENT_SOURCE = "tpcb-like at 1 client (pgbench)"


def _ran_a_server(step: StepRecord) -> bool:
    """Whether the step's workload needs a PostgreSQL server (pgbench, pgbench-init,
    seqread): a target whose steps did had one, even with no settings recorded."""
    plugin = find(step.workload)
    return plugin is not None and plugin.needs_server


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
    """The flush times a target's steps measured, as their workloads say (analysis/hooks.py
    `Evidence`): a flush after every write (fio's wal-fsync profile: write + fdatasync, as the
    commit ceiling counts it), the sync method in use, else fdatasync (pg_test_fsync), both on
    the data volume; and one connection's commits (pgbench tpcb-like at one client), whose
    average latency bounds a WAL flush from above."""
    done = [(s, e) for s in steps if s.status == "completed" and (e := evidence_of(s))]
    flushed: dict[str, list[float]] = {}
    for _, e in done:
        if e.flush_source is not None and e.flush_ms is not None:
            flushed.setdefault(e.flush_source, []).append(e.flush_ms)
    out = [_mean_flush(source, "data", values) for source, values in flushed.items()]
    method = settings.get("wal_sync_method") or "fdatasync"
    synced: dict[str, list[float]] = {}
    for _, e in done:
        if not e.sync_source:
            continue
        used = method if method in e.sync_method_us else "fdatasync"
        usecs = e.sync_method_us.get(used)
        if usecs is not None:
            synced.setdefault(f"{e.sync_source} {used}", []).append(usecs / 1000.0)
    out += [_mean_flush(source, "data", values) for source, values in synced.items()]
    one_client = [
        e.commit_latency_ms
        for s, e in done
        if e.commit_latency_ms is not None
        and not _flushes_skipped({**settings, **step_settings(s)})
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


def target_facts(
    target: TargetRecord, steps: Sequence[StepRecord], environment: Mapping[str, JSONValue]
) -> DurabilityFacts:
    server = target.kind in ("local", "dsn", "k8s") and (
        bool(target.settings) or any(_ran_a_server(s) for s in steps)
    )
    settings = {n: target.settings[n] for n in SETTINGS if n in target.settings}
    media, note = target_media(target)
    own = []
    for step in steps:
        ran = step_settings(step)
        if server and any(ran.get(n, settings.get(n)) != settings.get(n) for n in ran):
            own.append(StepSettings(str(step.id), verdict_label(step), {**settings, **ran}))
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
