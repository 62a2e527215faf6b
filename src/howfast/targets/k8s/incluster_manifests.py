"""`howfast run ... --in-cluster`: the objects that run howfast itself in the cluster, as plain
dicts, and the arguments it runs with. Pure: the same functions build what --dry-run prints
and what is created.

One in-cluster run is a set of objects sharing `howfast.dev/run=<token>` (names.labels):

    ConfigMap       howfast-ic-<token>   created first, the owner of the rest; holds a plan
                                         file given as PLAN (mounted read-only in the pod)
    ServiceAccount  howfast-ic-<token>   what the Job's pod talks to the API server as
    Role            howfast-ic-<token>   what a run needs in the namespace, nothing more
    RoleBinding     howfast-ic-<token>   the Role to the ServiceAccount
    Job             howfast-ic-<token>   one pod, no retries: `howfast in-cluster-job ARGS`

The owner being a ConfigMap (a kind `howfast cleanup` lists) lets cleanup find and remove an
in-cluster run by its label like any other; the garbage collector removes its dependents. The
Job's pod passes the "restricted" Pod Security Standard, except in the host network mode
(HOWFAST_K8S_NETWORK=host, for a test cluster without a pod network), where it shares its
node's network to reach the API server of the kubeconfig, as every pod of a run does there.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from howfast.errors import UsageError
from howfast.targets.k8s import names
from howfast.targets.k8s.network import NETWORK_ENV, NetworkMode
from howfast.targets.k8s.spec import PULL_POLICY_ENV, START_TIMEOUT_ENV

NAME_PREFIX = "howfast-ic-"
IN_CLUSTER_ANNOTATION = "howfast.dev/in-cluster"  # on the owner: the command it runs
TARGET_ANNOTATION = "howfast.dev/target"  # as the run's owner Secret has (cleanup shows it)
CONTAINER = "howfast"
JOB_COMMAND = "in-cluster-job"  # the hidden command the pod runs (cli/in_cluster.py)
UID = 999  # the user of howfast's images (tests/k8s/lab, deploy/Dockerfile.howfast)
SCRATCH_MOUNT = "/scratch"  # the pod's store and HOME: thrown away with the pod
SCRATCH_STORE = f"{SCRATCH_MOUNT}/store.db"
PLAN_MOUNT = "/etc/howfast-plan"
PLAN_KEY = "plan.toml"
SCRATCH_LIMIT = "1Gi"
# Room for the howfast inside to stop its tools and delete its own objects on SIGTERM.
GRACE_S = 120
# The settings of this machine's environment the run inside must see as well (lab settings).
PASSED_ENV = (NETWORK_ENV, PULL_POLICY_ENV, START_TIMEOUT_ENV)

# What a run needs in its namespace (deploy/k8s/role.yaml's Role, which a test keeps equal).
# Nothing cluster-wide: the StorageClass, PersistentVolume and node facts are left out of
# the record, as they are for a user without deploy/k8s/role.yaml's ClusterRole.
RUN_RULES: tuple[dict[str, Any], ...] = (
    {
        "apiGroups": [""],
        "resources": ["secrets", "configmaps", "persistentvolumeclaims", "pods", "services"],
        "verbs": ["create", "get", "list", "watch", "delete"],
    },
    {
        "apiGroups": ["networking.k8s.io"],
        "resources": ["networkpolicies"],
        "verbs": ["create", "get", "list", "watch", "delete"],
    },
    {"apiGroups": [""], "resources": ["pods/exec", "pods/portforward"], "verbs": ["create", "get"]},
    {"apiGroups": [""], "resources": ["pods/log", "events"], "verbs": ["get", "list", "watch"]},
    # the drain=NODE event evicts the run's server pod (cordoning needs the ClusterRole)
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
)

# Options of `howfast run` that stay on this machine: the store receives the run here, the
# kubeconfig context is this machine's, the image is the Job's, the output is printed here.
LOCAL_ONLY_OPTIONS = (
    "--in-cluster",
    "--dry-run",
    "--store",
    "--kube-context",
    "--howfast-image",
    "--json",
)


def job_name(token: str) -> str:
    return f"{NAME_PREFIX}{token}"


def token_of(job: str) -> str:
    """The token of a Job name howfast gave (`howfast fetch JOB`); UsageError otherwise."""
    token = job.removeprefix(NAME_PREFIX)
    if token == job or not token or not token.isalnum():
        raise UsageError(
            f"{job!r} is not an in-cluster run's Job: its name is {NAME_PREFIX}TOKEN",
            "`howfast cleanup --k8s` lists them",
        )
    return token


@dataclass(frozen=True)
class InClusterPlan:
    """Everything the objects of one in-cluster run are built from."""

    token: str
    namespace: str
    image: str
    run_args: tuple[str, ...]  # `howfast run` arguments inside the pod (pod_run_args)
    targets: tuple[str, ...]
    plan_text: str | None = None  # PLAN's text when it is a file here
    pull_policy: str | None = None
    network: NetworkMode = "pod"
    api_server: str | None = None  # host mode: this kubeconfig's server URL (the lab's)
    env: Mapping[str, str] = field(default_factory=dict)  # PASSED_ENV as set here

    @property
    def name(self) -> str:
        return job_name(self.token)


def pod_run_args(
    argv: Sequence[str],
    value_options: Collection[str],
    *,
    namespace: str,
    plan_is_file: bool,
) -> tuple[str, ...]:
    """The arguments of `howfast run` inside the pod: `argv` (this command's, after `run`)
    without LOCAL_ONLY_OPTIONS, PLAN replaced by the mounted file when it is one here, and
    --namespace set to the namespace the Job runs in. `value_options` are the options that
    take a value (their next argument is that value, never PLAN)."""
    out: list[str] = []
    positional_seen = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        option = arg.split("=", 1)[0] if arg.startswith("--") else arg
        takes_value = option in value_options and "=" not in arg
        if arg == "--":
            rest = list(argv[i + 1 :])
            if rest and not positional_seen and plan_is_file:
                rest[0] = f"{PLAN_MOUNT}/{PLAN_KEY}"
            out += ["--", *rest] if rest else []
            break
        if option in LOCAL_ONLY_OPTIONS or option == "--namespace":
            i += 2 if takes_value else 1
            continue
        if arg.startswith("-") and arg != "-":
            out += argv[i : i + 2] if takes_value else [arg]
            i += 2 if takes_value else 1
            continue
        if not positional_seen and plan_is_file:
            arg = f"{PLAN_MOUNT}/{PLAN_KEY}"
        positional_seen = True
        out.append(arg)
        i += 1
    return (*out, "--namespace", namespace)


def _meta(plan: InClusterPlan, owner: Mapping[str, str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": plan.name,
        "namespace": plan.namespace,
        "labels": names.labels(plan.token),
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": owner["name"], "uid": owner["uid"]}
        ]
    return meta


def owner_config_map(plan: InClusterPlan) -> dict[str, Any]:
    meta = _meta(plan, None)
    meta["annotations"] = {
        IN_CLUSTER_ANNOTATION: shlex.join(["howfast", "run", *plan.run_args]),
        TARGET_ANNOTATION: " ".join(plan.targets),
    }
    manifest: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
    if plan.plan_text is not None:
        manifest["data"] = {PLAN_KEY: plan.plan_text}
    return manifest


def service_account(plan: InClusterPlan, owner: Mapping[str, str] | None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(plan, owner)}


def role(plan: InClusterPlan, owner: Mapping[str, str] | None) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(plan, owner),
        "rules": [dict(rule) for rule in RUN_RULES],
    }


def role_binding(plan: InClusterPlan, owner: Mapping[str, str] | None) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(plan, owner),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": plan.name},
        "subjects": [{"kind": "ServiceAccount", "name": plan.name, "namespace": plan.namespace}],
    }


def _api_server_env(url: str) -> list[dict[str, str]]:
    """The lab's API server for the client library's in-cluster configuration, which reads
    KUBERNETES_SERVICE_HOST/PORT (set by the kubelet from the `kubernetes` Service, which the
    lab, without kube-proxy, cannot reach); the pod shares the node's network, where the API
    server listens."""
    parts = urlsplit(url)
    if not parts.hostname:
        raise UsageError(f"the kubeconfig's server {url!r} has no host")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return [
        {"name": "KUBERNETES_SERVICE_HOST", "value": parts.hostname},
        {"name": "KUBERNETES_SERVICE_PORT", "value": str(port)},
    ]


def job(plan: InClusterPlan, owner: Mapping[str, str] | None) -> dict[str, Any]:
    env = [
        {"name": "HOWFAST_STORE", "value": SCRATCH_STORE},
        {"name": "HOME", "value": SCRATCH_MOUNT},
        *({"name": k, "value": v} for k, v in sorted(plan.env.items()) if k in PASSED_ENV),
    ]
    mounts: list[dict[str, Any]] = [{"name": "scratch", "mountPath": SCRATCH_MOUNT}]
    volumes: list[dict[str, Any]] = [
        {"name": "scratch", "emptyDir": {"sizeLimit": SCRATCH_LIMIT}},
    ]
    if plan.plan_text is not None:
        mounts.append({"name": "plan", "mountPath": PLAN_MOUNT, "readOnly": True})
        volumes.append(
            {
                "name": "plan",
                "configMap": {"name": plan.name, "items": [{"key": PLAN_KEY, "path": PLAN_KEY}]},
            }
        )
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": plan.image,
        "command": ["howfast", JOB_COMMAND, "--", *plan.run_args],
        "env": env,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
        },
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
        "volumeMounts": mounts,
    }
    if plan.pull_policy:
        container["imagePullPolicy"] = plan.pull_policy
    pod_spec: dict[str, Any] = {
        "serviceAccountName": plan.name,
        "restartPolicy": "Never",
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": GRACE_S,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": UID,
            "runAsGroup": UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": volumes,
    }
    if plan.network == "host":
        if plan.api_server is None:
            raise UsageError("host network mode needs the API server's address")
        pod_spec["hostNetwork"] = True
        env += _api_server_env(plan.api_server)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(plan, owner),
        "spec": {
            "backoffLimit": 0,  # a benchmark is not retried behind the user's back
            "template": {"metadata": {"labels": names.labels(plan.token)}, "spec": pod_spec},
        },
    }


def dependents(plan: InClusterPlan, owner: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """Everything after the owner, in creation order (the Job last: its pod needs the rest)."""
    return [
        service_account(plan, owner),
        role(plan, owner),
        role_binding(plan, owner),
        job(plan, owner),
    ]


def all_manifests(plan: InClusterPlan) -> list[dict[str, Any]]:
    """What --dry-run --in-cluster prints (the owner's uid is known once it exists: UID)."""
    return [owner_config_map(plan), *dependents(plan, {"name": plan.name, "uid": "UID"})]
