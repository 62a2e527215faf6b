"""`howfast run ... --in-cluster` without a cluster: the objects it creates (RBAC limited to the
namespace, labels cleanup finds, a restricted pod), the arguments the Job's howfast gets, the
run file carried through the pod's log, the refusals and the dry run. The lab test
(tests/k8s/test_in_cluster.py) runs one for real."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from howfast.cli import main
from howfast.cli.app import cli
from howfast.cli.context import CliEnv
from howfast.cli.in_cluster import value_options
from howfast.errors import HowfastError, UsageError
from howfast.store import liveness
from howfast.targets.k8s import cleanup, names
from howfast.targets.k8s import incluster_manifests as icm
from howfast.targets.k8s import incluster_result as icr
from tests.conftest import PASSWORD

REPO = Path(__file__).resolve().parents[2]


def _plan(**changes: Any) -> icm.InClusterPlan:
    given: dict[str, Any] = {
        "token": "0a1b2c3d",
        "namespace": "bench",
        "image": "registry.example/howfast:1",
        "run_args": ("quick", "--target", "k8s://fast", "--namespace", "bench"),
        "targets": ("k8s://fast",),
    }
    given.update(changes)
    return icm.InClusterPlan(**given)


def _by_kind(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objects}


def _run_cli(args: list[str], tmp_path: Path, **environ: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    env = CliEnv(
        stdout=out,
        stderr=err,
        environ={"HOWFAST_STORE": str(tmp_path / "store.db"), **environ},
        terminal=False,
    )
    return main(args, env), out.getvalue(), err.getvalue()


# --- the objects --------------------------------------------------------------------------


def test_every_object_carries_the_run_labels_and_all_but_the_owner_belong_to_it() -> None:
    objects = icm.all_manifests(_plan())
    assert [o["kind"] for o in objects] == [
        "ConfigMap", "ServiceAccount", "Role", "RoleBinding", "Job",
    ]  # fmt: skip
    for obj in objects:
        assert obj["metadata"]["labels"] == names.labels("0a1b2c3d"), obj["kind"]
        assert obj["metadata"]["name"] == "howfast-ic-0a1b2c3d"
        assert obj["metadata"]["namespace"] == "bench"
    assert "ownerReferences" not in objects[0]["metadata"]
    for obj in objects[1:]:
        assert obj["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "howfast-ic-0a1b2c3d", "uid": "UID"}
        ]
    # the Job's pod too: `howfast cleanup` and the executor find it by the run label
    pod_labels = _by_kind(objects)["Job"]["spec"]["template"]["metadata"]["labels"]
    assert pod_labels == names.labels("0a1b2c3d")


def test_the_role_grants_only_what_deploy_role_yaml_lists_in_the_namespace() -> None:
    role = _by_kind(icm.all_manifests(_plan()))["Role"]
    documented = next(
        d for d in yaml.safe_load_all((REPO / "deploy/k8s/role.yaml").read_text())
        if d["kind"] == "Role"
    )  # fmt: skip
    assert role["rules"] == documented["rules"]
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        assert not {"update", "patch", "escalate", "bind", "impersonate"} & set(rule["verbs"])
        assert not {"roles", "rolebindings", "serviceaccounts", "jobs"} & set(rule["resources"])
    binding = _by_kind(icm.all_manifests(_plan()))["RoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "howfast-ic-0a1b2c3d",
    }  # fmt: skip
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "howfast-ic-0a1b2c3d", "namespace": "bench"}
    ]


def test_the_job_runs_once_as_the_service_account_with_a_restricted_security_context() -> None:
    job = _by_kind(icm.all_manifests(_plan()))["Job"]
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "howfast-ic-0a1b2c3d"
    assert pod["restartPolicy"] == "Never"
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 999,
        "runAsGroup": 999,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    (container,) = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
    }
    assert "hostNetwork" not in pod
    assert container["command"] == [
        "howfast", "in-cluster-job", "--", "quick", "--target", "k8s://fast",
        "--namespace", "bench",
    ]  # fmt: skip
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {"HOWFAST_STORE": "/scratch/store.db", "HOME": "/scratch"}


@pytest.mark.timeout(900)  # may build the checker: test_k8s_pod_security.BUILDS_CHECKER
def test_the_job_pod_passes_the_restricted_standard_as_kubernetes_evaluates_it() -> None:
    from tests.unit.test_k8s_pod_security import _evaluate

    def as_pod(plan: icm.InClusterPlan, name: str) -> dict[str, Any]:
        template = icm.job(plan, None)["spec"]["template"]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": template["spec"]}  # fmt: skip

    lab = _plan(network="host", api_server="https://127.0.0.1:6443")
    verdicts = _evaluate([as_pod(_plan(), "job-pod"), as_pod(lab, "job-host")])
    assert verdicts == {"job-pod": "ok", "job-host": "host namespaces (hostNetwork=true)"}


def test_lab_host_mode_shares_the_node_network_and_names_the_api_server() -> None:
    plan = _plan(
        network="host",
        api_server="https://127.0.0.1:6443",
        pull_policy="Never",
        env={"HOWFAST_K8S_NETWORK": "host", "HOWFAST_K8S_PULL_POLICY": "Never"},
    )
    pod = icm.job(plan, None)["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    (container,) = pod["containers"]
    assert container["imagePullPolicy"] == "Never"
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert env["KUBERNETES_SERVICE_PORT"] == "6443"
    assert env["HOWFAST_K8S_NETWORK"] == "host"  # the run inside uses the lab's mode too
    assert env["HOWFAST_K8S_PULL_POLICY"] == "Never"


def test_only_the_known_settings_of_this_environment_are_passed_on() -> None:
    plan = _plan(env={"HOWFAST_K8S_START_TIMEOUT": "60", "PGPASSWORD": PASSWORD})
    container = icm.job(plan, None)["spec"]["template"]["spec"]["containers"][0]
    names_passed = {e["name"] for e in container["env"]}
    assert "HOWFAST_K8S_START_TIMEOUT" in names_passed
    assert "PGPASSWORD" not in names_passed
    assert PASSWORD not in json.dumps(icm.all_manifests(plan))


def test_a_plan_file_travels_in_the_owner_and_is_mounted_read_only() -> None:
    plan = _plan(plan_text="[pgbench]\nclients = [1]\n")
    objects = _by_kind(icm.all_manifests(plan))
    assert objects["ConfigMap"]["data"] == {"plan.toml": "[pgbench]\nclients = [1]\n"}
    pod = objects["Job"]["spec"]["template"]["spec"]
    assert {"name": "plan", "mountPath": "/etc/howfast-plan", "readOnly": True} in pod[
        "containers"
    ][0]["volumeMounts"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "plan"]
    assert volume["configMap"]["name"] == "howfast-ic-0a1b2c3d"


# --- the arguments of the howfast inside ----------------------------------------------------


def test_pod_args_drop_what_stays_here_and_set_the_namespace() -> None:
    options = value_options(cli.get_command(None, "run"))  # type: ignore[arg-type]
    argv = [
        "quick", "--target", "k8s://fast", "--in-cluster", "--store", "/home/me/r.db",
        "--kube-context=lab", "--howfast-image", "img:1", "--json", "--dry-run",
        "--label", "a --store b", "--namespace", "ns1", "--clients", "1,2",
    ]  # fmt: skip
    args = icm.pod_run_args(argv, options, namespace="ns1", plan_is_file=False)
    assert args == (
        "quick", "--target", "k8s://fast", "--label", "a --store b", "--clients", "1,2",
        "--namespace", "ns1",
    )  # fmt: skip


def test_pod_args_point_a_plan_file_at_its_mount_wherever_it_is_given() -> None:
    options = value_options(cli.get_command(None, "run"))  # type: ignore[arg-type]
    argv = ["--target", "k8s://fast", "--label", "plan.toml", "/tmp/my plan.toml", "--yes"]
    args = icm.pod_run_args(argv, options, namespace="default", plan_is_file=True)
    assert args == (
        "--target", "k8s://fast", "--label", "plan.toml", "/etc/howfast-plan/plan.toml",
        "--yes", "--namespace", "default",
    )  # fmt: skip


def test_job_names_and_tokens() -> None:
    assert icm.token_of("howfast-ic-0a1b2c3d") == "0a1b2c3d"
    for bad in ("howfast-0a1b2c3d", "howfast-ic-", "howfast-ic-a,b", "job"):
        with pytest.raises(UsageError, match="is not an in-cluster run's Job"):
            icm.token_of(bad)


# --- the run file through the log ---------------------------------------------------------


def test_the_run_file_survives_the_log_among_other_lines() -> None:
    run_file = json.dumps({"format": "x", "runs": [{"series": list(range(5000))}]})
    lines = ["progress 1", *icr.encode(run_file), "after"]
    assert all(len(line) <= 76 for line in lines[2:-2])
    log = "\r\n".join(["earlier", *lines]) + "\n"
    assert icr.decode(log.splitlines()) == run_file
    shown = icr.LogLines()
    assert [line for line in lines if shown.is_progress(line)] == ["progress 1", "after"]


def test_no_block_or_an_unfinished_one_is_no_run_file_and_a_damaged_one_an_error() -> None:
    block = icr.encode('{"runs": []}')
    assert icr.decode(["a", "b"]) is None
    assert icr.decode(block[:-1]) is None  # the pod stopped while printing it
    body, mid = block[1], len(block[1]) // 2
    damaged = [block[0], body[:mid] + ("B" if body[mid] != "B" else "C") + body[mid + 1 :]]
    with pytest.raises(HowfastError, match="damaged"):
        icr.decode([*damaged, block[-1]])
    other = icr.encode('{"runs": [1]}')  # whole, but not the file the digest names
    with pytest.raises(HowfastError, match="SHA-256 differs"):
        icr.decode([*other[:-1], block[-1]])


# --- cleanup sees in-cluster runs ----------------------------------------------------------


def _objects(phase: str | None) -> list[dict[str, Any]]:
    owner = icm.owner_config_map(_plan())
    owner["kind"] = "ConfigMap"
    found = [owner]
    if phase is not None:
        labels = names.labels("0a1b2c3d")
        found.append(
            {
                "kind": "Pod",
                "metadata": {"name": "howfast-ic-0a1b2c3d-x", "namespace": "bench",
                             "labels": labels},
                "status": {"phase": phase},
            }
        )  # fmt: skip
    return found


@pytest.mark.parametrize(
    ("phase", "state"),
    [("Running", "running"), ("Pending", "running"), ("Succeeded", "unknown"),
     ("Failed", "unknown"), (None, "gone")],
)  # fmt: skip
def test_cleanup_leaves_a_running_or_unfetched_in_cluster_run_alone(
    phase: str | None, state: str
) -> None:
    (run,) = cleanup.group(_objects(phase), liveness.this_process())
    assert run.state == state
    assert run.target == "k8s://fast"
    if state == "unknown":
        assert run.writer is not None and "howfast fetch howfast-ic-0a1b2c3d" in run.writer


# --- the command line ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    ["postgresql://bench@127.0.0.1:5432/bench", "/var/tmp/somewhere"],
)
def test_in_cluster_refuses_targets_reached_from_this_machine(tmp_path: Path, target: str) -> None:
    status, out, err = _run_cli(
        ["run", "quick", "--target", target, "--in-cluster", "--howfast-image", "i:1"], tmp_path
    )
    assert status == 2
    assert f"{target} is not a k8s:// target" in err
    assert "run it without --in-cluster" in err
    assert out == ""


def test_in_cluster_needs_an_image_and_the_image_needs_in_cluster(tmp_path: Path) -> None:
    status, _, err = _run_cli(["run", "--target", "k8s://fast", "--in-cluster"], tmp_path)
    assert status == 2 and "--howfast-image" in err and "Dockerfile.howfast" in err
    status, _, err = _run_cli(["run", "--target", "k8s://f", "--howfast-image", "i"], tmp_path)
    assert status == 2 and "--howfast-image goes with --in-cluster" in err


def test_bad_run_input_is_refused_before_anything_is_built(tmp_path: Path) -> None:
    status, out, err = _run_cli(
        ["run", "--target", "k8s://fast", "--in-cluster", "--howfast-image", "i", "--dry-run",
         "--clients", "one"],
        tmp_path,
    )  # fmt: skip
    assert status == 2 and "--clients" in err and out == ""


def test_dry_run_prints_the_objects_with_the_args_and_the_plan_file(tmp_path: Path) -> None:
    plan = tmp_path / "tiny.toml"
    plan.write_text((REPO / "src/howfast/plans/builtin/quick.toml").read_text())
    status, out, err = _run_cli(
        ["run", str(plan), "--target", "k8s://fast", "--in-cluster", "--dry-run", "--label",
         "ci run", "--store", f"postgresql://u:{PASSWORD}@127.0.0.1/x", "--namespace", "bench"],
        tmp_path,
        HOWFAST_K8S_HOWFAST_IMAGE="registry.example/howfast:1",
    )  # fmt: skip
    assert status == 0, err
    objects = [o for o in yaml.safe_load_all(out) if o]
    assert [o["kind"] for o in objects] == [
        "ConfigMap", "ServiceAccount", "Role", "RoleBinding", "Job",
    ]  # fmt: skip
    assert objects[0]["data"]["plan.toml"] == plan.read_text()
    container = objects[-1]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example/howfast:1"
    assert container["command"][3:] == [
        "/etc/howfast-plan/plan.toml", "--target", "k8s://fast", "--label", "ci run",
        "--namespace", "bench",
    ]  # fmt: skip
    assert "# howfast run --in-cluster" in out
    assert PASSWORD not in out + err  # the store stays here, and so does its password
    assert not (tmp_path / "store.db").exists() or "ic-" not in (tmp_path / "store.db").name


def test_dry_run_as_json(tmp_path: Path) -> None:
    status, out, err = _run_cli(
        ["run", "quick", "--target", "k8s://fast", "--in-cluster", "--howfast-image", "i:1",
         "--dry-run", "--json"],
        tmp_path,
    )  # fmt: skip
    assert status == 0, err
    document = json.loads(out)
    assert document["dry_run"] is True
    assert document["in_cluster"]["job"].startswith("howfast-ic-")
    kinds = [o["kind"] for o in document["in_cluster"]["manifests"]]
    assert kinds == ["ConfigMap", "ServiceAccount", "Role", "RoleBinding", "Job"]


def test_fetch_refuses_a_name_that_is_not_an_in_cluster_job(tmp_path: Path) -> None:
    status, _, err = _run_cli(["fetch", "my-job"], tmp_path)
    assert status == 2 and "is not an in-cluster run's Job" in err


def test_the_documented_roles_let_a_user_create_and_delete_every_object_of_it() -> None:
    rules = [
        rule
        for name in ("role.yaml", "in-cluster-role.yaml")
        for doc in yaml.safe_load_all((REPO / "deploy/k8s" / name).read_text())
        if doc["kind"] == "Role"
        for rule in doc["rules"]
    ]
    resources = {
        "ConfigMap": ("", "configmaps"),
        "ServiceAccount": ("", "serviceaccounts"),
        "Role": ("rbac.authorization.k8s.io", "roles"),
        "RoleBinding": ("rbac.authorization.k8s.io", "rolebindings"),
        "Job": ("batch", "jobs"),
        "Pod": ("", "pods"),
        "Log": ("", "pods/log"),
    }
    kinds = {o["kind"] for o in icm.all_manifests(_plan())} | {"Pod", "Log"}
    for kind in kinds:
        group, resource = resources[kind]
        verbs = {
            verb
            for rule in rules
            if group in rule["apiGroups"] and resource in rule["resources"]
            for verb in rule["verbs"]
        }
        wanted = {"get"} if kind == "Log" else {"create", "get", "delete"}
        assert wanted <= verbs, kind


def test_a_password_in_an_argument_the_job_would_get_is_refused(tmp_path: Path) -> None:
    status, out, err = _run_cli(
        ["run", "--target", "k8s://fast", "--in-cluster", "--howfast-image", "i", "--dry-run",
         "--prometheus", f"http://me:{PASSWORD}@127.0.0.1:9090"],
        tmp_path,
    )  # fmt: skip
    assert status == 2 and "carries a credential (a password in a connection string)" in err
    assert PASSWORD not in out + err
