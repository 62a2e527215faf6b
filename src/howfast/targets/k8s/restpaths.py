"""The REST paths of the Kubernetes objects howfast reads and writes. Pure.

howfast talks to the API server in JSON over these paths (clusterapi.py), not through the
client library's generated API classes: importing those builds hundreds of pydantic models
(about 1.7 s of CPU per process here, before the first request), and howfast turns every
object into a plain dict anyway.
"""

from __future__ import annotations

from urllib.parse import quote

CORE = "/api/v1"
# kind -> (group/version prefix, plural, namespaced)
RESOURCES: dict[str, tuple[str, str, bool]] = {
    "Pod": (CORE, "pods", True),
    "PersistentVolumeClaim": (CORE, "persistentvolumeclaims", True),
    "ConfigMap": (CORE, "configmaps", True),
    "Secret": (CORE, "secrets", True),
    "Service": (CORE, "services", True),
    "ServiceAccount": (CORE, "serviceaccounts", True),
    "Event": (CORE, "events", True),
    "PersistentVolume": (CORE, "persistentvolumes", False),
    "Node": (CORE, "nodes", False),
    "Namespace": (CORE, "namespaces", False),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies", True),
    "StorageClass": ("/apis/storage.k8s.io/v1", "storageclasses", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "Job": ("/apis/batch/v1", "jobs", True),
    "EndpointSlice": ("/apis/discovery.k8s.io/v1", "endpointslices", True),
}
VERSION = "/version"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
MERGE_PATCH = "application/merge-patch+json"  # RFC 7386: null deletes a key


def path(
    kind: str, namespace: str | None = None, name: str | None = None, sub: str | None = None
) -> str:
    """The path of a kind's collection (in `namespace`, or across all namespaces when None),
    of one object (`name`), or of its subresource (`sub`: log, exec, status, eviction...)."""
    prefix, plural, namespaced = RESOURCES[kind]
    return _join(prefix, plural, namespace if namespaced else None, name, sub)


def custom_path(
    group: str,
    version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    sub: str | None = None,
) -> str:
    """The same for a custom resource (a CRD's group, version and plural)."""
    return _join(f"/apis/{group}/{version}", plural, namespace, name, sub)


def _join(
    prefix: str, plural: str, namespace: str | None, name: str | None, sub: str | None
) -> str:
    parts = [prefix]
    if namespace is not None:
        parts += ["namespaces", quote(namespace, safe="")]
    parts.append(plural)
    if name is not None:
        parts.append(quote(name, safe=""))
        if sub is not None:
            parts.append(sub)
    return "/".join(parts)
