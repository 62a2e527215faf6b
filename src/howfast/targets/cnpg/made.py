"""`k8s://CLASS?operator=cnpg&instances=N&sync=LEVEL[&wal=CLASS2]`: a CloudNativePG cluster
howfast makes through the operator on the class under test, runs the plan on as on a
`cnpg://` target, and deletes. Pure: the text, and the Cluster object.

    instances  the Cluster's spec.instances (1..9; default 3)
    sync       off: asynchronous standbys; on, remote_write, remote_apply, local: the
               operator's synchronous replication (method any, number 1, dataDurability
               required) and synchronous_commit = LEVEL (default on with standbys)
    wal        WAL on a volume of its own, of CLASS2 (spec.walStorage)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from howfast.design import unknown_key
from howfast.errors import UsageError
from howfast.targets.cnpg.discovery import API_VERSION
from howfast.targets.k8s.manifests import PG_UID
from howfast.targets.k8s.names import labels

SCHEME = "k8s://"
OPERATORS = ("cnpg",)
KEYS = ("operator", "instances", "sync", "wal")
SYNC_LEVELS = ("off", "local", "remote_write", "on", "remote_apply")
MAX_INSTANCES = 9
DEFAULT_INSTANCES = 3
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
USAGE = "give k8s://CLASS?operator=cnpg&instances=N&sync=LEVEL"


@dataclass(frozen=True)
class MadeSpec:
    text: str
    storage_class: str
    wal_class: str | None
    instances: int
    sync: str  # SYNC_LEVELS


def asks_operator(text: str) -> bool:
    """Whether a k8s:// text asks for a cluster made through an operator (?operator=)."""
    if not text.startswith(SCHEME):
        return False
    query = urlsplit(text).query
    return any(key == "operator" for key, _ in parse_qsl(query, keep_blank_values=True))


def _instances(text: str, query: Mapping[str, str]) -> int:
    value = query.get("instances", str(DEFAULT_INSTANCES))
    if not value.isdigit() or not 1 <= int(value) <= MAX_INSTANCES:
        raise UsageError(f"{text}: instances={value!r} is not a number in 1..{MAX_INSTANCES}")
    return int(value)


def parse_made(text: str, run_sync: str | None = None) -> MadeSpec:
    """The text (and the run's --sync when the text says none)."""
    parts = urlsplit(text)
    name = parts.netloc + parts.path.rstrip("/")
    try:
        query = dict(parse_qsl(parts.query, keep_blank_values=True, strict_parsing=True))
    except ValueError:
        raise UsageError(f"{text}: cannot read the query {parts.query!r}", USAGE) from None
    unknown = sorted(set(query) - set(KEYS))
    if unknown:
        raise UsageError(f"{text}: {unknown_key(unknown[0], KEYS)} (with operator=)", USAGE)
    if query.get("operator") not in OPERATORS:
        raise UsageError(
            f"{text}: operator={query.get('operator')!r} is not one of {', '.join(OPERATORS)}"
        )
    if not _NAME.match(name) or name == "emptyDir":
        raise UsageError(f"{text}: {name!r} is not a StorageClass name", USAGE)
    wal = query.get("wal")
    if wal is not None and not _NAME.match(wal):
        raise UsageError(f"{text}: wal={wal!r} is not a StorageClass name", USAGE)
    instances = _instances(text, query)
    sync = query.get("sync") or run_sync or ("on" if instances > 1 else "off")
    if sync not in SYNC_LEVELS:
        raise UsageError(f"{text}: sync={sync!r} is not one of {', '.join(SYNC_LEVELS)}")
    if sync != "off" and instances < 2:
        raise UsageError(f"{text}: sync={sync} needs standbys: instances=2 or more")
    return MadeSpec(text, name, wal, instances, sync)


def cluster_name(token: str) -> str:
    return f"howfast-{token}"


@dataclass(frozen=True)
class Pods:
    """What the Cluster's pods run: `image` None is the operator's default image (its
    postgres user, uid 26); an image of the user's (--image) is taken to be the official
    image's layout, as k8s:// pods are (postgres uid 999: PG_UID)."""

    size: str  # each volume's
    image: str | None = None
    pull_policy: str | None = None


def cluster_manifest(
    made: MadeSpec,
    token: str,
    namespace: str,
    owner: Mapping[str, str] | None,
    settings: Mapping[str, str],
    pods: Pods,
) -> dict[str, Any]:
    """The Cluster howfast makes (api/v1/cluster_types.go). Superuser access on: howfast's
    database is made by SQL. Labelled, and owned by the run's Secret: deleting it deletes
    the Cluster, whose pods and claims the operator's owner references take with it."""
    image_name, pull_policy, size = pods.image, pods.pull_policy, pods.size
    parameters = dict(settings)
    postgresql: dict[str, Any] = {"parameters": parameters}
    if made.sync != "off":
        postgresql["synchronous"] = {"method": "any", "number": 1, "dataDurability": "required"}
        parameters["synchronous_commit"] = made.sync
    spec: dict[str, Any] = {
        "instances": made.instances,
        "enableSuperuserAccess": True,
        "storage": {"storageClass": made.storage_class, "size": size},
        "postgresql": postgresql,
    }
    if made.wal_class is not None:
        spec["walStorage"] = {"storageClass": made.wal_class, "size": size}
    if image_name:
        spec["imageName"] = image_name
        spec["postgresUID"] = spec["postgresGID"] = PG_UID
    if pull_policy:
        spec["imagePullPolicy"] = pull_policy
    meta: dict[str, Any] = {
        "name": cluster_name(token),
        "namespace": namespace,
        "labels": labels(token),
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Secret", "name": owner["name"], "uid": owner["uid"]}
        ]
    return {"apiVersion": API_VERSION, "kind": "Cluster", "metadata": meta, "spec": spec}
