"""Cluster's waits on one pod, with watches (never polling loops): until it is Ready (failing
at once when waiting cannot help, saying what is stuck at the time-out) or gone; and the pure
readers of a pod's state (pod_ready, pod_problem)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from howfast.cancel import NEVER, CancelToken
from howfast.errors import HowfastError
from howfast.targets.k8s import clusterapi, names
from howfast.targets.k8s import restpaths as rp
from howfast.targets.k8s.cluster_reads import ClusterReads
from howfast.targets.k8s.clusterapi import _events
from howfast.targets.k8s.missed_binding import MissedBinding, remade_manifest

# Reasons a container waits for that will not go away by waiting longer.
STUCK_REASONS = {
    "ErrImagePull": "the image cannot be pulled",
    "ImagePullBackOff": "the image cannot be pulled",
    "ErrImageNeverPull": "the image is not on the node and the pull policy is Never",
    "InvalidImageName": "the image name is invalid",
    "CreateContainerConfigError": "the container's configuration is refused",
    "CreateContainerError": "the container cannot be created",
    "RunContainerError": "the container cannot start",
    "CrashLoopBackOff": "the container keeps exiting",
}


class ClusterPods(ClusterReads):
    """Waiting for a pod, and saying why it is not ready."""

    def wait_pod_gone(
        self, namespace: str, name: str, uid: str, timeout_s: float, cancel: CancelToken = NEVER
    ) -> bool:
        """Until the pod `name` with this uid is gone (a pod of that name made since does not
        count); False after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        selector = f"metadata.name={name}"
        while True:
            cancel.raise_if_cancelled()
            found = self.call(
                f"reading pod {name}", self.get, rp.path("Pod", namespace), fieldSelector=selector
            )
            if not any(str(p["metadata"].get("uid")) == uid for p in found.get("items") or []):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            stream = self.watch(
                rp.path("Pod", namespace),
                min(remaining, clusterapi.WATCH_CHUNK_S),
                clusterapi.WATCH_TIMEOUT_S,
                fieldSelector=selector,
                resourceVersion=found["metadata"].get("resourceVersion"),
            )
            for event in _events(stream, self.k8s):
                if event["type"] == "DELETED" and _uid(event["object"]) == uid:
                    return True
                if cancel.cancelled:
                    break

    # -- waiting for the pod ---------------------------------------------------------------
    def wait_pod_ready(
        self,
        namespace: str,
        name: str,
        claims: list[str],
        timeout_s: float,
        cancel: CancelToken = NEVER,
        until: Callable[[dict[str, Any]], bool] | None = None,
    ) -> dict[str, Any]:
        """Watch the pod until it is Ready (or `until(pod)`: a pod made ahead waits for its
        server container to run). Fails at once when waiting cannot help (an image that
        cannot be pulled, a container that exits); after `timeout_s` says what is stuck."""
        done = until or pod_ready
        deadline = time.monotonic() + timeout_s
        selector = f"metadata.name={name}"
        last: dict[str, Any] | None = None
        missed = self._missed_binding(namespace, claims)
        while True:
            cancel.raise_if_cancelled()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                stuck = self.stuck_message(namespace, name, claims, last, timeout_s)
                raise HowfastError("\n".join([stuck, *missed.said()]))
            missed.check(last)  # each watch chunk (WATCH_CHUNK_S) at most
            # Read before each watch: a watch's first events can be withheld while the API
            # server's watch cache catches up with etcd (etcd 3.4 without frequent progress
            # notifications: a pod that is already Ready and quiet was waited for until the
            # time-out, seen in the test lab), or by a proxy that buffers streams.
            current = self._read_if_answered(namespace, name)
            if current is not None:
                last = current
                if self._settled(namespace, name, last, done):
                    return last
            # A new watch each time, from the current state (its first events): resuming
            # from a resource version fails on some etcd versions ("Too large resource
            # version").
            stream = self.watch(
                rp.path("Pod", namespace),
                min(remaining, clusterapi.WATCH_CHUNK_S),
                clusterapi.WATCH_TIMEOUT_S,
                fieldSelector=selector,
            )
            for event in _events(stream, self.k8s):
                last = dict(event["object"])
                settled = self._settled(namespace, name, last, done)
                if settled:
                    return last
                if cancel.cancelled:
                    break

    def _missed_binding(self, namespace: str, claims: list[str]) -> MissedBinding:
        def phase(claim: str) -> str | None:
            pvc = self.read("PersistentVolumeClaim", claim, namespace) or {}
            return (pvc.get("status") or {}).get("phase")

        return MissedBinding(claims, phase, lambda pod: self.remake_parked_pod(namespace, pod))

    def remake_parked_pod(self, namespace: str, pod: Mapping[str, Any]) -> None:
        """Delete this pod (by its uid: not one made since) and create it again as it was;
        only a pod of howfast's (labelled) that is on no node (missed_binding.py)."""
        metadata = pod.get("metadata") or {}
        name, uid = str(metadata.get("name")), str(metadata.get("uid"))
        if (metadata.get("labels") or {}).get(names.MANAGED_BY) != names.MANAGER:
            return
        if (pod.get("spec") or {}).get("nodeName"):
            return
        try:
            self.send(
                "DELETE", rp.path("Pod", namespace, name), query={"gracePeriodSeconds": 0},
                body={"preconditions": {"uid": uid}},
            )  # fmt: skip
        except self.k8s.client.exceptions.ApiException as exc:
            if exc.status in (404, 409):  # gone, or another pod by now
                return
            raise self._error(exc, f"deleting pod {name} to make it again") from None
        if not self.wait_pod_gone(namespace, name, uid, 30):
            return  # still there: the wait goes on with it
        self.request(f"making pod {name} again", "POST", rp.path("Pod", namespace),
                     body=remade_manifest(pod))  # fmt: skip

    def _read_if_answered(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod as the API server has it now; None when the server does not answer it in
        time or fails the read: the wait goes on, and reports at its deadline."""
        import urllib3

        try:
            return self.read("Pod", name, namespace)
        except (HowfastError, urllib3.exceptions.HTTPError):
            return None

    def _settled(
        self,
        namespace: str,
        name: str,
        pod: dict[str, Any],
        done: Callable[[dict[str, Any]], bool],
    ) -> bool:
        """True when the pod is what is waited for; raises when waiting cannot help."""
        problem = pod_problem(pod)
        if problem:
            raise HowfastError(self.describe_failure(namespace, name, problem, pod))
        return done(pod)

    def describe_failure(self, namespace: str, name: str, problem: str, pod: dict[str, Any]) -> str:
        lines = [f"pod {namespace}/{name}: {problem}"]
        events = self.events(namespace, "Pod", name)
        if events:
            lines += ["events:"] + [f"  {e}" for e in events[-6:]]
        logs = self.container_logs(namespace, name, pod)
        if logs:
            lines += ["container output:"] + [f"  {line}" for line in logs]
        return "\n".join(lines)

    def container_logs(self, namespace: str, name: str, pod: dict[str, Any]) -> list[str]:
        out: list[str] = []
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if "terminated" not in (status.get("state") or {}):
                continue
            try:
                text = self.get(
                    rp.path("Pod", namespace, name, "log"), container=status["name"], tailLines=10
                )
            except Exception:
                continue
            out += [f"{status['name']}: {line}" for line in str(text).splitlines()]
        return out

    def stuck_message(
        self,
        namespace: str,
        name: str,
        claims: list[str],
        pod: dict[str, Any] | None,
        timeout_s: float,
    ) -> str:
        """What kept the pod from becoming ready: a Pending claim and its provisioner's
        events, the scheduler's message, a container still waiting."""
        lines = [f"pod {namespace}/{name} was not ready after {timeout_s:g} s"]
        for claim_name in claims:
            pvc = self.read("PersistentVolumeClaim", claim_name, namespace)
            phase = ((pvc or {}).get("status") or {}).get("phase")
            if phase != "Bound":
                sc = ((pvc or {}).get("spec") or {}).get("storageClassName")
                provisioner = (self.storage_class(str(sc)) or {}).get("provisioner") if sc else None
                lines.append(
                    f"PersistentVolumeClaim {claim_name} is {phase or 'missing'} "
                    f"(StorageClass {sc}, provisioner {provisioner or 'unknown'})"
                )
                lines += [
                    f"  {e}"
                    for e in self.events(namespace, "PersistentVolumeClaim", claim_name)[-5:]
                ]
        if pod is not None:
            for condition in (pod.get("status") or {}).get("conditions") or []:
                if condition.get("status") != "True" and condition.get("message"):
                    lines.append(f"{condition['type']}: {condition['message']}")
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                waiting = (status.get("state") or {}).get("waiting")
                if waiting:
                    lines.append(
                        f"container {status['name']} waiting: {waiting.get('reason')} "
                        f"{waiting.get('message') or ''}".rstrip()
                    )
        lines += [f"  {e}" for e in self.events(namespace, "Pod", name)[-5:]]
        return "\n".join(lines)


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid"))


def pod_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def container_running(pod: dict[str, Any], container: str) -> bool:
    """Whether the pod's container of that name is running (ready or not)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container:
            return "running" in (status.get("state") or {})
    return False


# The kubelet's own caches lag behind a pod just bound to its node (the API server's Node
# authorizer has not seen the binding yet: "no relationship found"): the kubelet retries, and
# the container starts a moment later. Seen in the test lab once in three runs.
TRANSIENT_MESSAGES = ("failed to sync secret cache", "failed to sync configmap cache")


def _kubelet_retries(message: str) -> bool:
    return any(text in message for text in TRANSIENT_MESSAGES)


def pod_problem(pod: dict[str, Any]) -> str | None:
    """Why the pod will never become ready, when that is already clear."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Failed", "Succeeded"):
        why = status.get("message") or status.get("reason") or "no reason given"
        return f"the pod {str(status.get('phase')).lower()}: {why}"
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        waiting = state.get("waiting") or {}
        reason = waiting.get("reason")
        if reason in STUCK_REASONS and not _kubelet_retries(str(waiting.get("message") or "")):
            image = container.get("image", "")
            return (
                f"container {container['name']} ({image}): {STUCK_REASONS[reason]} "
                f"({reason}: {waiting.get('message') or 'no message'})"
            )
        terminated = state.get("terminated")
        if terminated:
            return (
                f"container {container['name']} exited ({terminated.get('reason')}, "
                f"code {terminated.get('exitCode')})"
            )
    return None
