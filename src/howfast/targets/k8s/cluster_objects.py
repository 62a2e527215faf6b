"""What Cluster creates and deletes: a run's objects, found by their labels (cleanup by
label: never anything unlabelled), waited for until they and their volumes are gone; a pod's
eviction and a node's cordon (the drain events)."""

from __future__ import annotations

import time
from typing import Any

from howfast.errors import HowfastError
from howfast.targets.k8s import clusterapi, manifests
from howfast.targets.k8s import restpaths as rp
from howfast.targets.k8s.cluster_reads import ClusterReads
from howfast.targets.k8s.clusterapi import _events


class ClusterObjects(ClusterReads):
    """Creating, listing by label and deleting howfast's objects."""

    CREATED = ("Secret", "ConfigMap", "PersistentVolumeClaim", "Pod", "Service", "NetworkPolicy")

    def create(self, manifest: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        kind = manifest["kind"]
        if kind not in self.CREATED:
            raise KeyError(kind)
        namespace = manifest["metadata"]["namespace"]
        created = self.request(
            f"creating {kind} {manifest['metadata']['name']} in namespace {namespace}",
            "POST",
            rp.path(kind, namespace),
            query={"dryRun": "All"} if dry_run else None,
            body=manifest,
        )
        return dict(created)

    LISTED = ("Pod", "PersistentVolumeClaim", "ConfigMap", "Service", "NetworkPolicy", "Secret")
    OWNED_ONLY = ("Service", "NetworkPolicy")

    def list_labelled(self, namespace: str | None, label_selector: str) -> list[dict[str, Any]]:
        """Every object of the kinds howfast creates that carries the labels, pods first
        (across all namespaces when `namespace` is None)."""
        out: list[dict[str, Any]] = []
        for kind in self.LISTED:
            try:
                found = self.get(rp.path(kind, namespace), labelSelector=label_selector)
            except self.k8s.client.exceptions.ApiException as exc:
                # Services and NetworkPolicies (pod-mode standbys and client pods) are owned
                # by the run's Secret: a Role older than them may not list them, and the
                # garbage collector removes them with the Secret anyway.
                if exc.status == 403 and kind in self.OWNED_ONLY:
                    continue
                raise self._error(exc, f"listing {kind}s") from None
            except Exception as exc:
                raise HowfastError(
                    f"listing {kind}s: cannot reach the API server {self.host}: {exc}"
                ) from None
            for obj in found.get("items") or []:
                obj["kind"] = kind
                obj.pop("data", None)  # never keep a Secret's content around
                obj.pop("stringData", None)
                out.append(obj)
        return out

    def delete(self, kind: str, name: str, namespace: str, grace_s: int | None = None) -> None:
        if kind not in (*self.CREATED, "ServiceAccount", "Role", "RoleBinding", "Job"):
            raise KeyError(kind)
        options = {"propagationPolicy": "Background", "gracePeriodSeconds": grace_s}
        try:
            self.send("DELETE", rp.path(kind, namespace, name), query=options)
        except self.k8s.client.exceptions.ApiException as exc:
            if exc.status != 404:
                raise self._error(exc, f"deleting {kind} {name}") from None

    def evict(self, name: str, namespace: str, grace_s: int) -> None:
        """Evict a pod through the Eviction API, as `kubectl drain` does (disruption budgets
        are honoured; howfast's pods have none)."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"gracePeriodSeconds": grace_s},
        }
        self.request(
            f"evicting pod {name}", "POST", rp.path("Pod", namespace, name, "eviction"), body=body
        )

    def set_cordon(self, node: str, cordoned: bool, annotation: tuple[str, str]) -> None:
        """Mark a node unschedulable (or schedulable again), with the annotation that says
        who did (removed when uncordoning: null deletes a key in a merge patch)."""
        key, value = annotation
        patch = {
            "spec": {"unschedulable": cordoned or None},
            "metadata": {"annotations": {key: value if cordoned else None}},
        }
        self.request(
            f"{'cordoning' if cordoned else 'uncordoning'} node {node}", "PATCH",
            rp.path("Node", name=node), body=patch, content_type=rp.MERGE_PATCH,
        )  # fmt: skip

    def delete_run(
        self, namespace: str, token: str, *, timeout_s: float = 180.0, grace_s: int = 10
    ) -> list[str]:
        """Delete every object labelled with the run's token, then wait (with watches) until
        they and the PersistentVolumes bound to their claims are gone. Returns warnings:
        what is still there after the time-out, and volumes a Retain class keeps."""
        label = manifests.selector(token)
        objects = self.list_labelled(namespace, label)
        volumes = [
            str(o["spec"]["volumeName"])
            for o in objects
            if o["kind"] == "PersistentVolumeClaim" and (o.get("spec") or {}).get("volumeName")
        ]
        for obj in objects:  # only what carries the run's labels: never anything else
            meta = obj["metadata"]
            grace = grace_s if obj["kind"] == "Pod" else None
            self.delete(obj["kind"], meta["name"], meta["namespace"], grace)
        warnings = []
        deadline = time.monotonic() + timeout_s
        for kind in ("Pod", "PersistentVolumeClaim"):
            left = self._wait_deleted(rp.path(kind, namespace), deadline, labelSelector=label)
            if left:
                warnings.append(f"{kind}s still being deleted: {', '.join(left)}")
        # A claim bound while it was being deleted (Ctrl-C while a volume is provisioned:
        # seen in the lab) had no volume name when listed; its volume names it.
        claims = {
            str(o["metadata"]["name"]) for o in objects if o["kind"] == "PersistentVolumeClaim"
        }
        volumes += [v for v in self.volumes_of(namespace, claims) if v not in volumes]
        for volume in volumes:
            pv = self.read("PersistentVolume", volume)
            if pv is None:
                continue
            policy = (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy")
            if policy == "Delete":
                selector = f"metadata.name={volume}"
                if self._wait_deleted(
                    rp.path("PersistentVolume"), deadline, fieldSelector=selector
                ):
                    warnings.append(f"PersistentVolume {volume} is still being deleted")
            else:
                warnings.append(
                    f"PersistentVolume {volume} was kept: its reclaim policy is {policy}; "
                    f"delete it (and its data) with `kubectl delete pv {volume}`"
                )
        return warnings

    def volumes_of(self, namespace: str, claims: set[str]) -> list[str]:
        """The PersistentVolumes bound to these claims of the namespace ([] when PVs cannot
        be listed)."""
        if not claims:
            return []
        try:
            found = self.get(rp.path("PersistentVolume"))
        except Exception:
            return []
        out = []
        for pv in found.get("items") or []:
            ref = (pv.get("spec") or {}).get("claimRef") or {}
            if ref.get("namespace") == namespace and ref.get("name") in claims:
                out.append(str(pv["metadata"]["name"]))
        return out

    def _wait_deleted(self, collection: str, deadline: float, **selector: str) -> list[str]:
        """Until nothing in the collection matches the selector (a watch's DELETED events,
        listed again after each chunk); the names still there at the deadline."""
        while True:
            found = self.get(collection, **selector)
            left = {str(item["metadata"]["name"]) for item in found.get("items") or []}
            remaining = deadline - time.monotonic()
            if not left or remaining <= 0:
                return sorted(left)
            stream = self.watch(
                collection,
                min(remaining, 10),
                (clusterapi.WATCH_TIMEOUT_S[0], clusterapi.WATCH_TIMEOUT_S[1] + 10),
                resourceVersion=found["metadata"].get("resourceVersion"),
                **selector,
            )
            for event in _events(stream, self.k8s):
                if event["type"] == "DELETED":
                    left.discard(str(event["object"]["metadata"]["name"]))
                    if not left:
                        return []
