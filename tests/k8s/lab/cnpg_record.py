"""Record what the real CloudNativePG operator made for the Cluster lab/pg, healthy and through a
failover, as test data for `cnpg://` targets (`python -m tests.k8s.lab cnpg record DIR`).

Each phase directory holds kubectl's JSON: cluster.json, pods.json, pvcs.json, services.json,
endpointslices.json, secrets.json, events.json (the Cluster's). managedFields are dropped (noise
for a parser). Secrets keep their names, types, labels and keys; every value is replaced by
base64("placeholder"), and the recording is refused if any real secret value appears in any
file written.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

from tests.k8s.lab import cnpg, config
from tests.k8s.lab.config import Paths
from tests.k8s.lab.proc import LabError, log, wait_until

PLACEHOLDER = base64.b64encode(b"placeholder").decode()
SECRET_ANNOTATIONS_DROPPED = ("kubectl.kubernetes.io/last-applied-configuration",)


def _strip(obj: Any) -> Any:
    """Drop managedFields everywhere."""
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k != "managedFields"}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def masked_secrets(listing: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """(the list with every value replaced, the real values decoded) (pure)."""
    values: set[str] = set()
    items = []
    for secret in listing.get("items", []):
        data = secret.get("data") or {}
        for value in data.values():
            decoded = base64.b64decode(value).decode("utf-8", "replace")
            values.update(v for v in (value, decoded) if len(v) >= 8)
        meta = dict(secret["metadata"])
        annotations = {
            k: v
            for k, v in (meta.get("annotations") or {}).items()
            if k not in SECRET_ANNOTATIONS_DROPPED
        }
        meta["annotations"] = annotations
        items.append({**secret, "metadata": meta, "data": dict.fromkeys(sorted(data), PLACEHOLDER)})
    return {**listing, "items": items}, values


def _get(paths: Paths, *args: str) -> dict[str, Any]:
    got = cnpg._kubectl(paths, "get", *args, "-o", "json").stdout
    return _strip(json.loads(got))  # type: ignore[no-any-return]


def record(paths: Paths, out: Path, name: str, namespace: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    selector = f"cnpg.io/cluster={name}"
    services = f"kubernetes.io/service-name in ({name}-rw,{name}-ro,{name}-r)"
    docs: dict[str, dict[str, Any]] = {
        "cluster.json": _get(paths, "-n", namespace, "cluster", name),
        "pods.json": _get(paths, "-n", namespace, "pods", "-l", selector),
        "pvcs.json": _get(paths, "-n", namespace, "pvc", "-l", selector),
        "services.json": _get(paths, "-n", namespace, "services", "-l", selector),
        "endpointslices.json": _get(paths, "-n", namespace, "endpointslices", "-l", services),
        "events.json": _get(
            paths, "-n", namespace, "events", "--field-selector",
            f"involvedObject.kind=Cluster,involvedObject.name={name}",
        ),
    }  # fmt: skip
    secrets, values = masked_secrets(_get(paths, "-n", namespace, "secrets", "-l", selector))
    # the Cluster's own secrets are labelled; the CA and replication secrets by name too
    named = _get(paths, "-n", namespace, "secrets")
    extra = [s for s in named["items"] if s["metadata"]["name"].startswith(f"{name}-")]
    have = {s["metadata"]["name"] for s in secrets["items"]}
    more, more_values = masked_secrets(
        {"items": [s for s in extra if s["metadata"]["name"] not in have]}
    )
    secrets["items"] += more["items"]
    values |= more_values
    docs["secrets.json"] = secrets
    texts = {file: json.dumps(doc, indent=2, sort_keys=True) + "\n" for file, doc in docs.items()}
    for file, text in texts.items():
        if any(value in text for value in values):
            raise LabError(f"a secret's value appears in {file}: not written")
    for file, text in texts.items():
        (out / file).write_text(text)
    log(f"recorded {namespace}/{name} into {out}")


def record_failover(
    paths: Paths, out: Path, name: str = cnpg.CLUSTER_NAME, namespace: str = cnpg.CLUSTER_NAMESPACE
) -> dict[str, Any]:
    """healthy/, then the primary pod deleted: promoted/ (the operator switched
    currentPrimary), then healthy-after-failover/ (both instances ready again)."""
    timeline: dict[str, Any] = {"operator": config.CNPG_VERSION}
    status = cnpg.cluster_status(paths, name, namespace)
    if not cnpg.is_healthy(status, 2):
        raise LabError(f"{namespace}/{name} is not healthy: {status.get('phase')}")
    record(paths, out / "healthy", name, namespace)
    old = status["currentPrimary"]
    timeline["old_primary"] = old
    t0 = time.time()
    timeline["deleted_primary_at"] = t0
    cnpg._kubectl(paths, "-n", namespace, "delete", "pod", old, "--wait=false")

    def promoted() -> bool:
        now = cnpg.cluster_status(paths, name, namespace)
        return now.get("currentPrimary") not in (None, old)

    wait_until("the operator to promote a standby", promoted, 300, 0.5)
    timeline["promoted_after_s"] = round(time.time() - t0, 1)
    timeline["new_primary"] = cnpg.cluster_status(paths, name, namespace)["currentPrimary"]
    record(paths, out / "promoted", name, namespace)
    wait_until(
        "the cluster to be healthy again",
        lambda: cnpg.is_healthy(cnpg.cluster_status(paths, name, namespace), 2),
        600,
        1,
    )
    timeline["healthy_again_after_s"] = round(time.time() - t0, 1)
    record(paths, out / "healthy-after-failover", name, namespace)
    (out / "timeline.json").write_text(json.dumps(timeline, indent=2) + "\n")
    return timeline
