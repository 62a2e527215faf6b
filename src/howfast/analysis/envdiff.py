"""What differs between the environments of runs, and whether it matters to a comparison.

Differences that change results whatever the storage (the machine's kernel, CPUs and memory,
PostgreSQL's major version and settings) matter: a comparison of storage is not a comparison
of storage when they differ. Device and filesystem differences are listed without that warning,
since they are usually what is being compared, except mount options that change durability.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from howfast.model import JSONValue, RunRecord, TargetRecord

# (key, label, why it matters or None)
MACHINE_FIELDS: tuple[tuple[str, str, str | None], ...] = (
    ("kernel", "kernel", "the kernel's I/O path and page cache differ"),
    ("cpu_model", "CPU model", "CPU speed changes TPS of cached workloads"),
    ("cpu_count", "CPU count", "CPU count limits clients and pgbench threads"),
    ("memory_bytes", "memory", "memory decides whether the data set fits in cache"),
    ("os", "operating system", None),
    ("hostname", "host", None),
    ("howfast_version", "howfast version", None),
)
# Settings that name places or logging rather than change how PostgreSQL performs.
IRRELEVANT_SETTINGS = re.compile(
    r"^(port|listen_addresses|unix_socket_\w+|data_directory|config_file|hba_file|ident_file"
    r"|external_pid_file|cluster_name|application_name|log_\w+|logging_collector|lc_\w+"
    r"|timezone|log_timezone|datestyle|default_text_search_config|dynamic_shared_memory_type)$"
)
# Mount options under which a flush no longer means the data is on stable storage.
UNSAFE_MOUNT_OPTIONS = re.compile(r"(^|,)(nobarrier|barrier=0|data=writeback|async)(,|$)")


@dataclass(frozen=True)
class EnvDifference:
    scope: str  # "machine" or "target 1", "target 2"... (by position)
    field: str
    values: tuple[str | None, ...]  # one per run
    matters: bool
    why: str | None = None

    def document(self) -> dict[str, JSONValue]:
        return {
            "scope": self.scope,
            "field": self.field,
            "values": list(self.values),
            "matters": self.matters,
            "why": self.why,
        }


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _differ(values: Sequence[str | None]) -> bool:
    return len(set(values)) > 1


def _major(version: str | None) -> str | None:
    if not version:
        return None
    return version.split(".")[0]


def _storage(target: TargetRecord | None, role: str) -> dict[str, str | None]:
    """Filesystem, mount options and device facts of a role (data, wal)."""
    device = target.device if target else {}
    where = device.get(role) if isinstance(device, dict) else None
    if not isinstance(where, dict):
        return {}
    dev = where.get("device") if isinstance(where.get("device"), dict) else {}
    assert isinstance(dev, dict)
    sc = where.get("storage_class") if isinstance(where.get("storage_class"), dict) else {}
    assert isinstance(sc, dict)
    kubernetes = {  # k8s:// targets: the class and volume behind the role
        "StorageClass": _text(sc.get("name")),
        "provisioner": _text(sc.get("provisioner")),
        "class parameters": _text(sc.get("parameters") or None),
        "CSI driver": _text(where.get("csi_driver")),
        "volume attributes": _text(where.get("volume_attributes") or None),
    }
    return {
        **{k: v for k, v in kubernetes.items() if v is not None},
        "filesystem": _text(where.get("fstype")),
        "mount options": _text(where.get("mount_options")),
        "device": _text(dev.get("disk") or dev.get("name") or where.get("source")),
        "device model": _text(dev.get("model")),
        "rotational": _text(dev.get("rotational")),
        "I/O scheduler": _text(dev.get("scheduler")),
    }


def machine_differences(runs: Sequence[RunRecord]) -> list[EnvDifference]:
    found = []
    for key, label, why in MACHINE_FIELDS:
        values = tuple(_text(r.environment.get(key)) for r in runs)
        if _differ(values):
            found.append(EnvDifference("machine", label, values, why is not None, why))
    return found


def target_differences(
    position: int, targets: Sequence[TargetRecord | None]
) -> list[EnvDifference]:
    scope = f"target {position + 1}"
    found = []
    versions = tuple(t.pg_version if t else None for t in targets)
    if _differ(versions):
        major_differs = _differ(tuple(_major(v) for v in versions))
        why = "a major version changes the planner, WAL and I/O" if major_differs else None
        found.append(EnvDifference(scope, "PostgreSQL version", versions, major_differs, why))
    names = dict.fromkeys(k for t in targets if t for k in t.settings)
    for name in names:
        values = tuple(t.settings.get(name) if t else None for t in targets)
        # A created cluster gets its own port and socket directory each time: not news.
        if _differ(values) and not IRRELEVANT_SETTINGS.match(name):
            why = "PostgreSQL ran with other settings"
            found.append(EnvDifference(scope, f"setting {name}", values, True, why))
    for role in ("data", "wal"):
        facts = [_storage(t, role) for t in targets]
        for fact in dict.fromkeys(k for f in facts for k in f):
            values = tuple(f.get(fact) for f in facts)
            if not _differ(values):
                continue
            unsafe = fact == "mount options" and any(
                v and UNSAFE_MOUNT_OPTIONS.search(v) for v in values
            )
            why = "a mount option lets writes skip the flush" if unsafe else None
            found.append(EnvDifference(scope, f"{role} {fact}", values, unsafe, why))
    found += _kubernetes_differences(scope, targets)
    placements = tuple(client_placement(t) for t in targets)
    if all(v is not None for v in placements) and _differ(placements):
        why = "pgbench reached the server another way: its round trips differ (--client)"
        found.append(EnvDifference(scope, "client placement", placements, True, why))
    return found


def client_placement(target: TargetRecord | None) -> str | None:
    """Where pgbench ran (the record's `client`), with whether it shared the server's node;
    a k8s:// target recorded before the client pod existed ran it in the server's pod."""
    if target is None:
        return None
    client = target.client or ({"placement": "same-pod"} if target.kind == "k8s" else {})
    placement = client.get("placement")
    if placement is None:
        return None
    same = client.get("same_node")
    if placement == "pod" and isinstance(same, bool):
        return f"pod ({'on the server' if same else 'on another'} node)"
    return str(placement)


# k8s:// targets: where the pod ran (device["kubernetes"]); (path, label, why it matters)
KUBERNETES_FIELDS: tuple[tuple[tuple[str, ...], str, str | None], ...] = (
    (("server_version",), "Kubernetes version", None),
    (("node", "kernel"), "node kernel", "the kernel's I/O path and page cache differ"),
    (("node", "os_image"), "node OS", None),
    (("node", "labels"), "node instance type and zone", "another machine type or zone"),
    (("node", "allocatable_cpu"), "node CPUs", "CPU count limits clients and pgbench threads"),
    (("node", "allocatable_memory"), "node memory", "memory decides what fits in cache"),
    (("pod", "qos_class"), "pod QoS class", None),
    (("pod", "resources", "postgres"), "server resources", "the server had other CPU/memory"),
)


def _kubernetes_differences(
    scope: str, targets: Sequence[TargetRecord | None]
) -> list[EnvDifference]:
    def pick(target: TargetRecord | None, path: tuple[str, ...]) -> str | None:
        value: object = target.device.get("kubernetes") if target else None
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return _text(value) if value not in (None, {}, "") else None

    found = []
    for path, label, why in KUBERNETES_FIELDS:
        values = tuple(pick(t, path) for t in targets)
        if any(v is not None for v in values) and _differ(values):
            found.append(EnvDifference(scope, label, values, why is not None, why))
    return found


def environment_diff(runs: Sequence[RunRecord]) -> list[EnvDifference]:
    """Differences between the runs' machines, then between their targets by position."""
    found = machine_differences(runs)
    positions = max((len(r.targets) for r in runs), default=0)
    for position in range(positions):
        targets = [r.targets[position] if position < len(r.targets) else None for r in runs]
        found += target_differences(position, targets)
    return found
