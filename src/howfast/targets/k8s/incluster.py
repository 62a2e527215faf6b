"""`howfast run ... --in-cluster` and `howfast fetch JOB`: create the objects of an in-cluster
run (incluster_manifests.py), follow its pod's log, read the run file it prints at the end
(incluster_result.py), delete what was created. Thin: the API calls and the waiting.

Whoever follows the log may go away (Ctrl-C deletes the run; a closed terminal or a lost
connection leaves it): the Job runs to its end without anyone following, and its pod's log
keeps the run file until `howfast fetch` reads it and deletes the objects.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from howfast.errors import HowfastError, UsageError
from howfast.targets.k8s import incluster_manifests as icm
from howfast.targets.k8s import incluster_result, manifests
from howfast.targets.k8s import restpaths as rp
from howfast.targets.k8s.cluster import Cluster, pod_problem

POLL_S = 1.0  # how often the pod's state is read while it starts and after its log ends
START_TIMEOUT_S = 300.0  # a pod that does not start (image pull, scheduling) within this
NO_POD_TIMEOUT_S = 60.0  # a Job whose pod is not even created (refused by admission)
LOG_READ_TIMEOUT_S = (10.0, 600.0)  # a run may print nothing for minutes (a long step)


class NotStarted(HowfastError):
    """The Job's pod cannot start (or was never created): nothing runs, delete it all."""


@dataclass(frozen=True)
class Finished:
    """How the Job's pod ended: its exit code and the run file it printed (None: none)."""

    exit_code: int
    run_file: str | None
    log_tail: list[str]


def create(cluster: Cluster, plan: icm.InClusterPlan) -> None:
    """The owner first, then its dependents; on a failure, whatever was created is deleted."""
    ns = plan.namespace
    owner = cluster.create(icm.owner_config_map(plan))
    ref = {"name": plan.name, "uid": str(owner["metadata"]["uid"])}
    try:
        for manifest in icm.dependents(plan, ref):
            kind = manifest["kind"]
            if kind not in ("ServiceAccount", "Role", "RoleBinding", "Job"):
                raise KeyError(kind)
            cluster.request(f"creating {kind} {plan.name} in namespace {ns}", "POST",
                            rp.path(kind, ns), body=manifest)  # fmt: skip
    except BaseException:
        delete(cluster, ns, plan.token)
        raise


def delete(cluster: Cluster, namespace: str, token: str) -> list[str]:
    """Delete the run's objects: the Job and its pod first, whose howfast gets SIGTERM and
    deletes what its run made within the grace period (with the Role it still has: the RBAC
    objects go only once the pod is gone), then the RBAC objects and every labelled object
    (Cluster.delete_run: the owner). Warnings: what is still there after the waits."""
    name = icm.job_name(token)
    cluster.delete("Job", name, namespace)
    deadline = time.monotonic() + icm.GRACE_S + 60.0
    for pod in _pods(cluster, namespace, token):
        cluster.delete("Pod", str(pod["metadata"]["name"]), namespace, icm.GRACE_S)
    while (left := _pods(cluster, namespace, token)) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    warnings = [f"the pod of Job {name} is still being deleted"] if left else []
    for kind in ("RoleBinding", "Role", "ServiceAccount"):
        cluster.delete(kind, name, namespace)
    return warnings + cluster.delete_run(namespace, token, timeout_s=60.0)


def exists(cluster: Cluster, namespace: str, token: str) -> bool:
    """Whether the Job is there (`howfast fetch`)."""
    try:
        cluster.get(rp.path("Job", namespace, icm.job_name(token)))
    except cluster.k8s.client.exceptions.ApiException as exc:
        if exc.status == 404:
            return False
        raise cluster._error(exc, f"reading Job {icm.job_name(token)}") from None
    return True


def _pods(cluster: Cluster, namespace: str, token: str) -> list[dict[str, Any]]:
    return cluster.items(
        f"listing the pods of {icm.job_name(token)}",
        rp.path("Pod", namespace),
        labelSelector=manifests.selector(token),
    )


def _terminated(pod: dict[str, Any]) -> dict[str, Any] | None:
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        if container.get("name") == icm.CONTAINER:
            state = container.get("state") or {}
            return state.get("terminated") if isinstance(state.get("terminated"), dict) else None
    return None


def _wait_started(cluster: Cluster, namespace: str, token: str) -> str:
    """The pod's name once its container runs or has run; fails when it cannot start."""
    name = icm.job_name(token)
    t0 = time.monotonic()
    while True:
        pods = _pods(cluster, namespace, token)
        if pods:
            pod = pods[0]
            phase = (pod.get("status") or {}).get("phase")
            if phase in ("Running", "Succeeded", "Failed"):
                return str(pod["metadata"]["name"])
            problem = pod_problem(pod)
            if problem is not None:
                raise NotStarted(f"the pod of Job {name} cannot start: {problem}")
            limit = START_TIMEOUT_S
        else:
            limit = NO_POD_TIMEOUT_S
        if time.monotonic() - t0 > limit:
            events = cluster.events(namespace, "Job", name)
            if pods:
                events += cluster.events(namespace, "Pod", str(pods[0]["metadata"]["name"]))
            said = "; ".join(events[-4:]) or "no events"
            raise NotStarted(f"the pod of Job {name} did not start within {limit:g} s ({said})")
        time.sleep(POLL_S)


def _follow(
    cluster: Cluster, namespace: str, pod: str, show: Callable[[str], None], shown: int
) -> int:
    """Show the log's lines after the first `shown`, following it until the container ends
    (or the stream breaks); the number of lines seen."""
    stream = cluster.call(
        f"following the log of pod {pod}",
        cluster.open,
        "GET",
        rp.path("Pod", namespace, pod, "log"),
        query={"container": icm.CONTAINER, "follow": True},
        timeout=LOG_READ_TIMEOUT_S,
    ).response
    lines = incluster_result.LogLines()
    seen = 0
    try:
        for raw in stream:
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            seen += 1
            if lines.is_progress(line) and seen > shown:
                show(line)
    except Exception:  # a broken stream: the caller looks at the pod and follows again
        pass
    finally:  # closed, not just released: the log may still be coming
        stream.close()
        stream.release_conn()
    return max(seen, shown)


def follow(cluster: Cluster, namespace: str, token: str, show: Callable[[str], None]) -> Finished:
    """Wait for the Job's pod, show its log as it comes, and once its container has ended,
    read the whole log for the run file."""
    pod = _wait_started(cluster, namespace, token)
    shown = 0
    while True:
        found = [p for p in _pods(cluster, namespace, token) if p["metadata"]["name"] == pod]
        if not found:
            raise HowfastError(f"the pod {pod} of Job {icm.job_name(token)} was deleted")
        terminated = _terminated(found[0])
        if terminated is not None:  # (a Job fetched after its end: nothing to follow)
            break
        shown = _follow(cluster, namespace, pod, show, shown)
        time.sleep(POLL_S)
    text = cluster.call(
        f"reading the log of pod {pod}",
        cluster.get,
        rp.path("Pod", namespace, pod, "log"),
        container=icm.CONTAINER,
    )
    log_lines = str(text).splitlines()
    progress = incluster_result.LogLines()
    tail = [line for line in log_lines if progress.is_progress(line)][-20:]
    return Finished(int(terminated.get("exitCode") or 0), incluster_result.decode(log_lines), tail)


def missing(namespace: str, job: str) -> UsageError:
    return UsageError(
        f"no Job {job} in namespace {namespace}",
        "`howfast cleanup --k8s` lists in-cluster runs; give --namespace if it is elsewhere",
    )
