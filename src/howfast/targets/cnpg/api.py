"""The CloudNativePG objects through the Kubernetes API: a thin executor over targets/k8s's
Cluster (its kubeconfig, bounded calls and messages). Reads the Cluster, its instance pods
and claims, a secret, the -rw Service's EndpointSlices and the Cluster's events; patches the
Cluster's status as the operator's plugin does (operator.py builds the patches); creates and
deletes howfast's Database resources. Nothing here decides: discovery.py and operator.py do.
"""

from __future__ import annotations

from typing import Any

from howfast.errors import HowfastError, UsageError
from howfast.targets.cnpg.discovery import CLUSTER_LABEL, GROUP, VERSION, ClusterLayout, layout
from howfast.targets.k8s import restpaths as rp
from howfast.targets.k8s.cluster import Cluster

SERVICE_LABEL = "kubernetes.io/service-name"
DELETE_POD_GRACE_S = 1  # 0 means "force" to the API (the object goes before the container)


def _custom(plural: str, namespace: str | None = None, name: str | None = None) -> str:
    return rp.custom_path(GROUP, VERSION, plural, namespace, name)


class CnpgApi:
    """One Cluster's API client, asked about CloudNativePG objects."""

    def __init__(self, cluster: Cluster) -> None:
        self.kube = cluster

    def _not_found(self, exc: Exception) -> bool:
        return getattr(exc, "status", None) == 404

    def read_cluster(self, namespace: str, name: str) -> dict[str, Any]:
        """The Cluster; UsageError naming what is missing (the Cluster or the CRD)."""
        try:
            found = self.kube.get(_custom("clusters", namespace, name))
        except self.kube.k8s.client.exceptions.ApiException as exc:
            if self._not_found(exc):
                raise UsageError(
                    f"no CloudNativePG Cluster {name} in namespace {namespace}",
                    "kubectl get clusters.postgresql.cnpg.io -A lists them (is the operator "
                    "installed?)",
                ) from None
            raise self.kube._error(exc, f"reading Cluster {namespace}/{name}") from None
        except Exception as exc:
            raise HowfastError(f"reading Cluster {namespace}/{name}: {exc}") from None
        return dict(found)

    def layout(self, namespace: str, name: str) -> tuple[dict[str, Any], ClusterLayout]:
        """The Cluster, and what it is made of (discovery.py) from it, its pods and claims."""
        obj = self.read_cluster(namespace, name)
        pods = self.instance_pods(namespace, name)
        claims = self.instance_claims(namespace, name)
        return obj, layout(obj, pods, claims)

    def _labelled(
        self, kind: str, namespace: str, selector: str, doing: str
    ) -> list[dict[str, Any]]:
        return self.kube.items(doing, rp.path(kind, namespace), labelSelector=selector)

    def instance_pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return self._labelled(
            "Pod", namespace, f"{CLUSTER_LABEL}={name}", f"listing the pods of Cluster {name}"
        )

    def instance_claims(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return self._labelled(
            "PersistentVolumeClaim", namespace, f"{CLUSTER_LABEL}={name}",
            f"listing the claims of Cluster {name}",
        )  # fmt: skip

    def read_secret(self, namespace: str, name: str) -> dict[str, Any]:
        """A secret with its data: kept in memory by the caller, never printed."""
        secret = self.kube.request(
            f"reading Secret {name} in namespace {namespace}",
            "GET", rp.path("Secret", namespace, name),
        )  # fmt: skip
        return dict(secret)

    def rw_slices(self, namespace: str, service: str) -> list[dict[str, Any]]:
        return self._labelled(
            "EndpointSlice", namespace, f"{SERVICE_LABEL}={service}",
            f"listing the endpoints of Service {service}",
        )  # fmt: skip

    def delete_pod(self, namespace: str, name: str) -> None:
        """An instance's pod, killed (delete-pod: the operator makes it again and fails over).
        With a grace period of 1 s, as CloudNativePG's docs simulate a failed primary: with the
        pod's own (`stopDelay`, 1800 s) its instance manager shuts PostgreSQL down "smart",
        waiting up to `smartShutdownTimeout` (180 s) for every session to end, and the
        operator promotes only after that (seen on the lab: 3 minutes "Failing over")."""
        self.kube.delete("Pod", name, namespace, grace_s=DELETE_POD_GRACE_S)

    def cluster_events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return self.kube.items(
            f"listing the events of Cluster {name}",
            rp.path("Event", namespace),
            fieldSelector=f"involvedObject.kind=Cluster,involvedObject.name={name}",
        )

    def patch_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """A merge patch of the Cluster's status subresource (with its resourceVersion: the
        API refuses it, 409, when the Cluster changed since it was read)."""
        self.kube.request(
            f"patching the status of Cluster {namespace}/{name}", "PATCH",
            rp.custom_path(GROUP, VERSION, "clusters", namespace, name, "status"),
            body=patch, content_type=rp.MERGE_PATCH,
        )  # fmt: skip

    def create_cluster(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """A Cluster howfast makes (k8s://CLASS?operator=cnpg), never the user's."""
        return self._create("clusters", "Cluster", manifest)

    def _create(self, plural: str, kind: str, manifest: dict[str, Any]) -> dict[str, Any]:
        meta = manifest["metadata"]
        created = self.kube.request(
            f"creating {kind} {meta['name']} in namespace {meta['namespace']}",
            "POST", _custom(plural, meta["namespace"]), body=manifest,
        )  # fmt: skip
        return dict(created)

    def _delete(self, plural: str, kind: str, namespace: str, name: str) -> None:
        try:
            self.kube.send("DELETE", _custom(plural, namespace, name))
        except self.kube.k8s.client.exceptions.ApiException as exc:
            if not self._not_found(exc):
                raise self.kube._error(exc, f"deleting {kind} {name}") from None

    def delete_cluster(self, namespace: str, name: str) -> None:
        """Only a Cluster howfast made (its caller checks the name is the run's)."""
        self._delete("clusters", "Cluster", namespace, name)

    def create_database(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return self._create("databases", "Database", manifest)

    def read_database(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.kube.get(_custom("databases", namespace, name)))
        except self.kube.k8s.client.exceptions.ApiException as exc:
            if self._not_found(exc):
                return None
            raise self.kube._error(exc, f"reading Database {name}") from None

    def delete_database(self, namespace: str, name: str) -> None:
        self._delete("databases", "Database", namespace, name)

    def labelled_databases(self, namespace: str | None, selector: str) -> list[dict[str, Any]]:
        """howfast's Database resources (by its labels); [] when the CRD is not installed."""
        try:
            found = self.kube.get(_custom("databases", namespace), labelSelector=selector)
        except self.kube.k8s.client.exceptions.ApiException as exc:
            if self._not_found(exc):
                return []
            raise self.kube._error(exc, "listing Database resources") from None
        return [dict(item) for item in found.get("items") or []]
