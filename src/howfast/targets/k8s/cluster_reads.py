"""What Cluster reads without changing anything: the server's version, namespaces, nodes,
StorageClasses, one object, an object's events, and whether this user may do something."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from howfast.targets.k8s.clusterapi import ClusterApi


class ClusterReads(ClusterApi):
    """Reading the cluster's facts (plain dicts)."""

    def server_version(self) -> str:
        version = self.call(
            "reading the server version", self.k8s.client.VersionApi(self.api_client).get_code
        )
        return str(version.git_version)

    def namespace_exists(self, namespace: str) -> bool:
        try:
            self.core.read_namespace(namespace)
        except self.k8s.client.exceptions.ApiException as exc:
            if exc.status == 404:
                return False
            if exc.status == 403:
                return True  # may not read namespaces; creating in it will tell
            raise self._error(exc, f"reading namespace {namespace}") from None
        return True

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        """The namespace's labels ({} when it cannot be read: admission will tell)."""
        try:
            found = self.core.read_namespace(namespace)
        except self.k8s.client.exceptions.ApiException:
            return {}
        return {str(k): str(v) for k, v in (found.metadata.labels or {}).items()}

    def node_names(self) -> list[str]:
        return sorted(str(node["metadata"]["name"]) for node in self.nodes())

    def nodes(self) -> list[dict[str, Any]]:
        found = self.call("listing nodes", self.core.list_node)
        return [self.plain(node) for node in found.items]

    def storage_class(self, name: str) -> dict[str, Any] | None:
        try:
            return self.plain(self.storage.read_storage_class(name))
        except self.k8s.client.exceptions.ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status == 403:
                return {}  # cannot read it: not a reason to refuse
            raise self._error(exc, f"reading StorageClass {name}") from None

    def storage_classes(self) -> list[dict[str, Any]]:
        found = self.call("listing StorageClasses", self.storage.list_storage_class)
        return [self.plain(sc) for sc in found.items]

    def read(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        readers: dict[str, Callable[..., Any]] = {
            "Pod": self.core.read_namespaced_pod,
            "PersistentVolumeClaim": self.core.read_namespaced_persistent_volume_claim,
            "PersistentVolume": self.core.read_persistent_volume,
            "Node": self.core.read_node,
            "ConfigMap": self.core.read_namespaced_config_map,
        }
        args = (name, namespace) if namespace else (name,)
        try:
            return self.plain(readers[kind](*args))
        except self.k8s.client.exceptions.ApiException as exc:
            if exc.status in (403, 404):
                return None
            raise self._error(exc, f"reading {kind} {name}") from None

    def events(self, namespace: str, kind: str, name: str) -> list[str]:
        """The events about one object, oldest first, as 'Reason: message' lines."""
        try:
            found = self.core.list_namespaced_event(
                namespace, field_selector=f"involvedObject.kind={kind},involvedObject.name={name}"
            )
        except Exception:
            return []
        items = sorted(
            (self.plain(e) for e in found.items),
            key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""),
        )
        lines = []
        for event in items:
            source = (event.get("source") or {}).get("component") or event.get(
                "reportingComponent", ""
            )
            line = f"{event.get('reason')}: {event.get('message', '').strip()}"
            if source:
                line += f" ({source})"
            if line not in lines:
                lines.append(line)
        return lines

    def access(self, namespace: str, verb: str, resource: str, group: str = "") -> bool | None:
        """Whether this user may do `verb` on `resource` there (SelfSubjectAccessReview);
        None when the question cannot be asked."""
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "namespace": namespace,
                    "verb": verb,
                    "resource": resource.split("/")[0],
                    "subresource": resource.split("/")[1] if "/" in resource else None,
                    "group": group,
                }
            },
        }
        api = self.k8s.client.AuthorizationV1Api(self.api_client)
        try:
            review = api.create_self_subject_access_review(body)
        except Exception:
            return None
        return bool(review.status.allowed)
