"""The Kubernetes API, through the official client: kubeconfig resolution, creating and
deleting a run's objects, waiting with watches (never polling loops), exec streams and a
port-forward for the SQL howfast itself sends (statistics views, ALTER SYSTEM). The tools
never go through the port-forward: they run in the pod (hosts/pod.py).

Objects go in and come out as plain dicts (camelCase, as in YAML), so that the pure builders
and readers (manifests.py, facts.py) never see the client's classes.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from howfast.cancel import NEVER, CancelToken
from howfast.errors import Aborted, HowfastError, UsageError
from howfast.hosts.pod import ExecResult
from howfast.targets.k8s import manifests

WATCH_CHUNK_S = 5  # a watch is re-opened this often, to look at the cancel token and deadline
# Client-side limits, so that an API server (or a kubelet behind it) that stops answering
# fails a call with a message instead of blocking howfast for ever: (connect, read) seconds.
REQUEST_TIMEOUT_S = (10.0, 60.0)
# the server ends a watch chunk first; a watch silent for longer is given up and read again
WATCH_TIMEOUT_S = (10.0, WATCH_CHUNK_S + 10.0)
STREAM_OPEN_TIMEOUT_S = 60.0  # an exec's or port-forward's websocket handshake
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


def _kubernetes() -> Any:
    try:
        import kubernetes
    except ImportError as exc:  # pragma: no cover - a dependency
        raise HowfastError(f"the kubernetes client library is missing: {exc}") from None
    return kubernetes


def _kubeconfig() -> str | None:
    """KUBECONFIG as it is now (the client library reads it once, when it is imported);
    None: the library's default, ~/.kube/config."""
    return os.environ.get("KUBECONFIG") or None


def kubeconfig_namespace(context: str | None) -> str | None:
    """The namespace of the kubeconfig context (KUBECONFIG, ~/.kube/config), without any
    network access; None when there is no kubeconfig or the context names none."""
    k8s = _kubernetes()
    try:
        contexts, active = k8s.config.list_kube_config_contexts(config_file=_kubeconfig())
    except Exception:  # no kubeconfig, or one that cannot be read: the caller decides
        return None
    chosen = active
    if context is not None:
        chosen = next((c for c in contexts or [] if c.get("name") == context), None)
    if not chosen:
        return None
    namespace = (chosen.get("context") or {}).get("namespace")
    return str(namespace) if namespace else None


class Cluster:
    """One API client for one kubeconfig context."""

    def __init__(self, context: str | None = None) -> None:
        k8s = _kubernetes()
        try:
            self.api_client = k8s.config.new_client_from_config(
                config_file=_kubeconfig(), context=context
            )
        except Exception as exc:
            try:  # inside a pod: its service account
                k8s.config.load_incluster_config()
                self.api_client = k8s.client.ApiClient()
            except Exception:
                raise UsageError(
                    f"cannot load a kubeconfig{f' context {context!r}' if context else ''}: {exc}",
                    "set KUBECONFIG or write ~/.kube/config; choose a context with --kube-context",
                ) from None
        self.k8s = k8s
        _bound_requests(self.api_client)
        self.core = k8s.client.CoreV1Api(self.api_client)
        self.storage = k8s.client.StorageV1Api(self.api_client)
        self.networking = k8s.client.NetworkingV1Api(self.api_client)
        self.context = context
        self.host = str(self.api_client.configuration.host)

    # -- plain dicts in and out ---------------------------------------------------------
    def plain(self, obj: Any) -> dict[str, Any]:
        return dict(self.api_client.sanitize_for_serialization(obj))

    def _error(self, exc: Exception, doing: str) -> HowfastError:
        status = getattr(exc, "status", None)
        body = getattr(exc, "body", None) or ""
        message = str(exc)
        with contextlib.suppress(Exception):
            import json

            message = json.loads(body).get("message") or message
        if status == 403:
            return HowfastError(
                f"{doing}: forbidden: {message}",
                "the Role in deploy/k8s/role.yaml lists what howfast needs in the namespace",
            )
        if status is None:
            return HowfastError(f"{doing}: cannot reach the API server {self.host}: {message}")
        return HowfastError(f"{doing}: {message}")

    def call(self, doing: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except self.k8s.client.exceptions.ApiException as exc:
            raise self._error(exc, doing) from None
        except Exception as exc:  # urllib3's connection errors
            if isinstance(exc, HowfastError | Aborted):
                raise
            raise HowfastError(f"{doing}: cannot reach the API server {self.host}: {exc}") from None

    # -- facts ----------------------------------------------------------------------------
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

    # -- create and delete ----------------------------------------------------------------
    def create(self, manifest: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        kind = manifest["kind"]
        namespace = manifest["metadata"]["namespace"]
        creators: dict[str, Callable[..., Any]] = {
            "Secret": self.core.create_namespaced_secret,
            "ConfigMap": self.core.create_namespaced_config_map,
            "PersistentVolumeClaim": self.core.create_namespaced_persistent_volume_claim,
            "Pod": self.core.create_namespaced_pod,
            "Service": self.core.create_namespaced_service,
            "NetworkPolicy": self.networking.create_namespaced_network_policy,
        }
        kwargs = {"dry_run": "All"} if dry_run else {}
        created = self.call(
            f"creating {kind} {manifest['metadata']['name']} in namespace {namespace}",
            creators[kind],
            namespace,
            manifest,
            **kwargs,
        )
        return self.plain(created)

    LISTED = ("Pod", "PersistentVolumeClaim", "ConfigMap", "Service", "NetworkPolicy", "Secret")
    OWNED_ONLY = ("Service", "NetworkPolicy")

    def list_labelled(self, namespace: str | None, label_selector: str) -> list[dict[str, Any]]:
        """Every object of the kinds howfast creates that carries the labels, pods first."""
        out: list[dict[str, Any]] = []
        for kind in self.LISTED:
            snake = {
                "Pod": "pod",
                "PersistentVolumeClaim": "persistent_volume_claim",
                "ConfigMap": "config_map",
                "Service": "service",
                "NetworkPolicy": "network_policy",
                "Secret": "secret",
            }[kind]
            api = self.networking if kind == "NetworkPolicy" else self.core
            if namespace is None:
                fn = getattr(api, f"list_{snake}_for_all_namespaces")
                args: tuple[Any, ...] = ()
            else:
                fn = getattr(api, f"list_namespaced_{snake}")
                args = (namespace,)
            try:
                found = fn(*args, label_selector=label_selector)
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
            for item in found.items:
                obj = self.plain(item)
                obj["kind"] = kind
                obj.pop("data", None)  # never keep a Secret's content around
                obj.pop("stringData", None)
                out.append(obj)
        return out

    def delete(self, kind: str, name: str, namespace: str, grace_s: int | None = None) -> None:
        deleters: dict[str, Callable[..., Any]] = {
            "Secret": self.core.delete_namespaced_secret,
            "ConfigMap": self.core.delete_namespaced_config_map,
            "PersistentVolumeClaim": self.core.delete_namespaced_persistent_volume_claim,
            "Pod": self.core.delete_namespaced_pod,
            "Service": self.core.delete_namespaced_service,
            "NetworkPolicy": self.networking.delete_namespaced_network_policy,
        }
        kwargs: dict[str, Any] = {"propagation_policy": "Background"}
        if grace_s is not None:
            kwargs["grace_period_seconds"] = grace_s
        try:
            deleters[kind](name, namespace, **kwargs)
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
        self.call(
            f"evicting pod {name}", self.core.create_namespaced_pod_eviction, name, namespace, body
        )

    def set_cordon(self, node: str, cordoned: bool, annotation: tuple[str, str]) -> None:
        """Mark a node unschedulable (or schedulable again), with the annotation that says
        who did (removed when uncordoning)."""
        key, value = annotation
        patch = {
            "spec": {"unschedulable": cordoned or None},
            "metadata": {"annotations": {key: value if cordoned else None}},
        }
        self.call(f"{'cordoning' if cordoned else 'uncordoning'} node {node}",
                  self.core.patch_node, node, patch)  # fmt: skip

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
            left = self._wait_gone(namespace, kind, label, deadline)
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
                if not self._wait_pv_gone(volume, deadline):
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
            found = self.core.list_persistent_volume()
        except Exception:
            return []
        out = []
        for pv in found.items:
            ref = pv.spec.claim_ref if pv.spec else None
            if ref is not None and ref.namespace == namespace and ref.name in claims:
                out.append(str(pv.metadata.name))
        return out

    def _wait_gone(self, namespace: str, kind: str, label: str, deadline: float) -> list[str]:
        lister = {
            "Pod": self.core.list_namespaced_pod,
            "PersistentVolumeClaim": self.core.list_namespaced_persistent_volume_claim,
        }[kind]
        while True:
            watch = self.k8s.watch.Watch()
            found = lister(namespace, label_selector=label)
            left = {item.metadata.name for item in found.items}
            remaining = deadline - time.monotonic()
            if not left or remaining <= 0:
                return sorted(left)
            stream = watch.stream(
                lister,
                namespace,
                label_selector=label,
                resource_version=found.metadata.resource_version,
                timeout_seconds=max(1, int(min(remaining, 10))),
                _request_timeout=(WATCH_TIMEOUT_S[0], WATCH_TIMEOUT_S[1] + 10),
            )
            for event in _events(stream, self.k8s):
                if event["type"] == "DELETED":
                    left.discard(event["object"].metadata.name)
                    if not left:
                        watch.stop()
                        return []

    def _wait_pv_gone(self, name: str, deadline: float) -> bool:
        while time.monotonic() < deadline:
            watch = self.k8s.watch.Watch()
            found = self.core.list_persistent_volume(field_selector=f"metadata.name={name}")
            if not found.items:
                return True
            remaining = deadline - time.monotonic()
            stream = watch.stream(
                self.core.list_persistent_volume,
                field_selector=f"metadata.name={name}",
                resource_version=found.metadata.resource_version,
                timeout_seconds=max(1, int(min(remaining, 10))),
                _request_timeout=(WATCH_TIMEOUT_S[0], WATCH_TIMEOUT_S[1] + 10),
            )
            for event in _events(stream, self.k8s):
                if event["type"] == "DELETED":
                    watch.stop()
                    return True
        return False

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
                f"reading pod {name}",
                self.core.list_namespaced_pod,
                namespace,
                field_selector=selector,
            )
            if not any(str(p.metadata.uid) == uid for p in found.items):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            watch = self.k8s.watch.Watch()
            stream = watch.stream(
                self.core.list_namespaced_pod,
                namespace,
                field_selector=selector,
                resource_version=found.metadata.resource_version,
                timeout_seconds=max(1, int(min(remaining, WATCH_CHUNK_S))),
                _request_timeout=WATCH_TIMEOUT_S,
            )
            for event in _events(stream, self.k8s):
                if event["type"] == "DELETED" and str(event["object"].metadata.uid) == uid:
                    watch.stop()
                    return True
                if cancel.cancelled:
                    watch.stop()
                    break

    # -- waiting for the pod ---------------------------------------------------------------
    def wait_pod_ready(
        self,
        namespace: str,
        name: str,
        claims: list[str],
        timeout_s: float,
        cancel: CancelToken = NEVER,
    ) -> dict[str, Any]:
        """Watch the pod until it is Ready. Fails at once when waiting cannot help (an image
        that cannot be pulled, a container that exits); after `timeout_s` says what is stuck."""
        deadline = time.monotonic() + timeout_s
        selector = f"metadata.name={name}"
        last: dict[str, Any] | None = None
        while True:
            cancel.raise_if_cancelled()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise HowfastError(self.stuck_message(namespace, name, claims, last, timeout_s))
            # Read before each watch: a watch's first events can be withheld while the API
            # server's watch cache catches up with etcd (etcd 3.4 without frequent progress
            # notifications: a pod that is already Ready and quiet was waited for until the
            # time-out, seen in the test lab), or by a proxy that buffers streams.
            current = self._read_if_answered(namespace, name)
            if current is not None:
                last = current
                if self._settled(namespace, name, last):
                    return last
            # A new watch each time, from the current state (its first events): resuming
            # from a resource version fails on some etcd versions ("Too large resource
            # version").
            watch = self.k8s.watch.Watch()
            stream = watch.stream(
                self.core.list_namespaced_pod,
                namespace,
                field_selector=selector,
                timeout_seconds=max(1, int(min(remaining, WATCH_CHUNK_S))),
                _request_timeout=WATCH_TIMEOUT_S,
            )
            for event in _events(stream, self.k8s):
                last = self.plain(event["object"])
                try:
                    settled = self._settled(namespace, name, last)
                except HowfastError:
                    watch.stop()
                    raise
                if settled or cancel.cancelled:
                    watch.stop()
                    if settled:
                        return last
                    break

    def _read_if_answered(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod as the API server has it now; None when the server does not answer it in
        time or fails the read: the wait goes on, and reports at its deadline."""
        import urllib3

        try:
            return self.read("Pod", name, namespace)
        except (HowfastError, urllib3.exceptions.HTTPError):
            return None

    def _settled(self, namespace: str, name: str, pod: dict[str, Any]) -> bool:
        """True when the pod is Ready; raises when waiting cannot help."""
        problem = pod_problem(pod)
        if problem:
            raise HowfastError(self.describe_failure(namespace, name, problem, pod))
        return pod_ready(pod)

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
                text = self.core.read_namespaced_pod_log(
                    name, namespace, container=status["name"], tail_lines=10
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

    # -- exec and port-forward -------------------------------------------------------------
    def _stream_api(self) -> Any:
        """A CoreV1Api on an API client of its own: kubernetes.stream swaps its client's
        request function while a stream connects, so a shared client would send other
        threads' REST calls through a websocket."""
        client = self.k8s.client.ApiClient(configuration=self.api_client.configuration)
        return self.k8s.client.CoreV1Api(client)

    def exec_stream(self, namespace: str, pod: str, container: str, command: list[str]) -> Any:
        """An exec session (the client's WSClient), not yet read."""
        from kubernetes.stream import stream

        api = self._stream_api()
        doing = f"exec in pod {pod}"
        return _open_within(
            doing,
            lambda: self.call(
                doing,
                stream,
                api.connect_get_namespaced_pod_exec,
                pod,
                namespace,
                container=container,
                command=command,
                stdin=False,
                stdout=True,
                stderr=True,
                tty=False,
                _preload_content=False,
            ),
        )

    def exec_shell(self, namespace: str, pod: str, container: str) -> Any:
        """A long-lived /bin/sh in the container, reading commands on its stdin (the
        client's WSClient; hosts/podshell.py writes and reads it)."""
        from kubernetes.stream import stream

        api = self._stream_api()
        doing = f"exec in pod {pod}"
        return _open_within(
            doing,
            lambda: self.call(
                doing,
                stream,
                api.connect_get_namespaced_pod_exec,
                pod,
                namespace,
                container=container,
                command=["/bin/sh"],
                stdin=True,
                stdout=True,
                stderr=True,
                tty=False,
                _preload_content=False,
            ),
        )

    def port_forward(self, namespace: str, pod: str, port: int) -> Any:
        """A port-forward session to one port of the pod (the client's PortForward)."""
        from kubernetes.stream import portforward

        api = self._stream_api()
        return _open_within(
            f"port-forward to pod {pod}",
            lambda: portforward(
                api.connect_get_namespaced_pod_portforward, pod, namespace, ports=str(port)
            ),
        )

    def exec(
        self,
        namespace: str,
        pod: str,
        container: str,
        command: list[str],
        *,
        timeout_s: float = 60.0,
    ) -> ExecResult:
        """Run a short command in a container; its whole output."""
        session = self.exec_stream(namespace, pod, container, command)
        out: list[str] = []
        err: list[str] = []
        try:
            deadline = time.monotonic() + timeout_s
            while session.is_open():
                session.update(timeout=1)
                if session.peek_stdout():
                    out.append(session.read_stdout())
                if session.peek_stderr():
                    err.append(session.read_stderr())
                if time.monotonic() > deadline:
                    raise HowfastError(
                        f"{' '.join(command[:3])} in pod {pod}: no answer in {timeout_s:g} s"
                    )
            out.append(session.read_stdout() or "")
            err.append(session.read_stderr() or "")
            code = session.returncode
        finally:
            session.close()
        return ExecResult(int(code if code is not None else -1), "".join(out), "".join(err))


def _bound_requests(api_client: Any) -> None:
    """Every REST call of this client gets REQUEST_TIMEOUT_S unless it asks for its own
    (the client's default is to wait for ever)."""
    rest = api_client.rest_client
    unbounded = rest.request

    def bounded(*args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("_request_timeout"):
            kwargs["_request_timeout"] = REQUEST_TIMEOUT_S
        return unbounded(*args, **kwargs)

    rest.request = bounded


def _open_within(doing: str, connect: Callable[[], Any]) -> Any:
    """`connect()` (a websocket handshake, which the client makes without a time-out) in a
    thread of its own, given STREAM_OPEN_TIMEOUT_S; a session that opens after we gave up
    is closed."""
    lock = threading.Lock()
    outcome: dict[str, Any] = {}
    opened = threading.Event()

    def attempt() -> None:
        try:
            session = connect()
        except BaseException as exc:  # handed to the caller
            with lock:
                outcome["error"] = exc
            opened.set()
            return
        with lock:
            if outcome.get("abandoned"):
                with contextlib.suppress(Exception):
                    session.close()
                return
            outcome["session"] = session
        opened.set()

    threading.Thread(target=attempt, daemon=True, name="howfast-stream-open").start()
    opened.wait(STREAM_OPEN_TIMEOUT_S)
    with lock:
        if "error" in outcome:
            raise outcome["error"]
        if "session" in outcome:
            return outcome["session"]
        outcome["abandoned"] = True
    raise HowfastError(
        f"{doing}: the API server did not open the stream within {STREAM_OPEN_TIMEOUT_S:g} s"
    )


def _events(stream: Iterator[dict[str, Any]], k8s: Any) -> Iterator[dict[str, Any]]:
    """A watch's events; a watch the server ends with an error (an expired or too new
    resource version, a time-out) or that stops answering just ends: the caller lists and
    watches again, within its own deadline."""
    import urllib3

    try:
        yield from stream
    except k8s.client.exceptions.ApiException as exc:
        if exc.status not in (410, 504, 500):
            raise
        time.sleep(0.5)
    except urllib3.exceptions.HTTPError as exc:
        # urllib3 gives up on a silent server with MaxRetryError(reason=ReadTimeoutError)
        reason = getattr(exc, "reason", None) or exc
        if not isinstance(
            reason, urllib3.exceptions.ReadTimeoutError | urllib3.exceptions.ProtocolError
        ):
            raise
        time.sleep(0.5)


def pod_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


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


class PortForward:
    """127.0.0.1:PORT here, forwarded to 127.0.0.1:PORT in the pod through the API server
    (each connection its own port-forward stream). Only for howfast's own SQL."""

    def __init__(self, cluster: Cluster, namespace: str, pod: str, listener: socket.socket) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.pod = pod
        self.listener = listener
        self.port = int(listener.getsockname()[1])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True, name="howfast-pf")

    @staticmethod
    def reserve() -> socket.socket:
        """A listening socket on a free loopback port: the port PostgreSQL will use too."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        return listener

    @staticmethod
    def free_port() -> int:
        """A loopback port free now (host mode: a server's port on this machine; the lab's
        nodes are this machine). Another process may take it before the server binds it:
        that server then fails to start, and its log says why."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return int(probe.getsockname()[1])

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self.listener.close()

    def _accept(self) -> None:
        self.listener.settimeout(0.5)
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            forward = self.cluster.port_forward(self.namespace, self.pod, self.port)
            remote = forward.socket(self.port)
            remote.setblocking(True)
        except Exception:
            client.close()
            return
        try:
            _pump(client, remote, self._stop)
        finally:
            for s in (client, remote):
                with contextlib.suppress(OSError):
                    s.close()
            with contextlib.suppress(Exception):
                forward.close()


def _pump(a: socket.socket, b: socket.socket, stop: threading.Event) -> None:
    peers = {a: b, b: a}
    while not stop.is_set():
        readable, _, _ = select.select(list(peers), [], [], 0.5)
        for sock in readable:
            try:
                data = sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            peers[sock].sendall(data)


@contextlib.contextmanager
def forwarded(
    cluster: Cluster, namespace: str, pod: str, listener: socket.socket
) -> Iterator[PortForward]:
    forward = PortForward(cluster, namespace, pod, listener)
    forward.start()
    try:
        yield forward
    finally:
        forward.close()
