"""What Cluster reads without changing anything: the server's version, namespaces, nodes,
StorageClasses, one object, an object's events, and whether this user may do something."""

from __future__ import annotations

from typing import Any

from howfast.targets.k8s import restpaths as rp
from howfast.targets.k8s.clusterapi import ClusterApi

READABLE = ("Pod", "PersistentVolumeClaim", "PersistentVolume", "Node", "ConfigMap")


class ClusterReads(ClusterApi):
    """Reading the cluster's facts (plain dicts)."""

    def server_version(self) -> str:
        version = self.request("reading the server version", "GET", rp.VERSION)
        return str(version.get("gitVersion"))

    def namespace_exists(self, namespace: str) -> bool:
        try:
            self.get(rp.path("Namespace", name=namespace))
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
            found = self.get(rp.path("Namespace", name=namespace))
        except self.k8s.client.exceptions.ApiException:
            return {}
        labels = (found.get("metadata") or {}).get("labels") or {}
        return {str(k): str(v) for k, v in labels.items()}

    def node_names(self) -> list[str]:
        return sorted(str(node["metadata"]["name"]) for node in self.nodes())

    def nodes(self) -> list[dict[str, Any]]:
        return self.items("listing nodes", rp.path("Node"))

    def storage_class(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.get(rp.path("StorageClass", name=name)))
        except self.k8s.client.exceptions.ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status == 403:
                return {}  # cannot read it: not a reason to refuse
            raise self._error(exc, f"reading StorageClass {name}") from None

    def storage_classes(self) -> list[dict[str, Any]]:
        return self.items("listing StorageClasses", rp.path("StorageClass"))

    def read(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        if kind not in READABLE:
            raise KeyError(kind)
        try:
            return dict(self.get(rp.path(kind, namespace, name)))
        except self.k8s.client.exceptions.ApiException as exc:
            if exc.status in (403, 404):
                return None
            raise self._error(exc, f"reading {kind} {name}") from None

    def events(self, namespace: str, kind: str, name: str) -> list[str]:
        """The events about one object, oldest first, as 'Reason: message' lines."""
        selector = f"involvedObject.kind={kind},involvedObject.name={name}"
        try:
            found = self.get(rp.path("Event", namespace), fieldSelector=selector)
        except Exception:
            return []
        items = sorted(
            found.get("items") or [],
            key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""),
        )
        lines = []
        for event in items:
            source = (event.get("source") or {}).get("component") or event.get(
                "reportingComponent", ""
            )
            line = f"{event.get('reason')}: {(event.get('message') or '').strip()}"
            if source:
                line += f" ({source})"
            if line not in lines:
                lines.append(line)
        return lines

    def access(self, namespace: str, verb: str, resource: str, group: str = "") -> bool | None:
        """Whether this user may do `verb` on `resource` there (SelfSubjectAccessReview);
        None when the question cannot be asked."""
        attributes = {
            "namespace": namespace,
            "verb": verb,
            "resource": resource.split("/")[0],
            "group": group,
        }
        if "/" in resource:
            attributes["subresource"] = resource.split("/")[1]
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        try:
            review = self.send("POST", rp.ACCESS_REVIEWS, body=body)
        except Exception:
            return None
        return bool((review.get("status") or {}).get("allowed"))
