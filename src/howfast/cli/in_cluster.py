"""`howfast run ... --in-cluster`, `howfast fetch JOB` and the command the Job's pod runs
(`howfast in-cluster-job`, hidden): howfast itself runs in the cluster as a Job, its run comes
back into this machine's store (the work is in targets/k8s/incluster*.py)."""

from __future__ import annotations

import json
import secrets
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from howfast import __version__
from howfast.cli.context import CliEnv, pass_env
from howfast.cli.options import RAW_ARGS, json_option, store_option
from howfast.cli.output import EXIT_FOR_STATUS
from howfast.cli.stores import open_results
from howfast.errors import Aborted, ExitStatus, HowfastError, UsageError
from howfast.service.requests import RunRequest
from howfast.service.run import RunService

if TYPE_CHECKING:
    from howfast.targets.k8s.cluster import Cluster
    from howfast.targets.k8s.incluster import Finished
    from howfast.targets.k8s.incluster_manifests import InClusterPlan

IMAGE_ENV = "HOWFAST_K8S_HOWFAST_IMAGE"


def value_options(command: click.Command) -> set[str]:
    """The option names of `command` that take a value."""
    found: set[str] = set()
    for param in command.params:
        if isinstance(param, click.Option) and not param.is_flag and not param.count:
            found.update(param.opts)
    return found


def refusal(targets: Sequence[str]) -> str | None:
    """Why these targets cannot run --in-cluster (None: they can)."""
    from howfast.targets.k8s.spec import SCHEME

    if not targets:
        return "--in-cluster needs --target k8s://CLASS (the Job runs in that cluster)"
    for target in targets:
        if not target.startswith(SCHEME):
            return (
                f"--in-cluster runs howfast as a Job in a Kubernetes cluster; {target} is not a "
                "k8s:// target (a directory or a postgresql:// server is reached from this "
                "machine: run it without --in-cluster)"
            )
    return None


def run_in_cluster(
    env: CliEnv,
    request: RunRequest,
    store: str | None,
    as_json: bool,
    *,
    image: str | None,
    kube: Mapping[str, str | None],
    metrics_port: int | None,
) -> int:
    """`howfast run ... --in-cluster`: the run is checked here, then runs as a Job."""
    from howfast.targets.k8s import incluster_manifests as icm
    from howfast.targets.k8s.cluster import kubeconfig_namespace
    from howfast.targets.k8s.network import network_mode

    why = refusal(request.targets)
    if why is not None:
        raise UsageError(why)
    if metrics_port is not None:
        raise UsageError("--metrics-port with --in-cluster would listen inside the Job's pod")
    image = _job_image(env, image)
    context = kube.get("kube_context")
    namespace = kube.get("namespace") or kubeconfig_namespace(context) or "default"
    ctx = click.get_current_context()
    plan_file = Path(request.plan)
    plan_text = _read_plan(plan_file)
    run_args = icm.pod_run_args(
        ctx.meta.get(RAW_ARGS, []),
        value_options(ctx.command),
        namespace=namespace,
        plan_is_file=plan_text is not None,
    )
    # Bad input is refused here, before anything is created in the cluster; a credential
    # first, before any message could quote the argument that carries it.
    _refuse_credentials(run_args, plan_file, plan_text, namespace)
    RunService(env.service(store)).prepare(request)
    network = network_mode(env.environ)
    cluster, api_server = _cluster(context, network, request.dry_run)
    plan = icm.InClusterPlan(
        token=secrets.token_hex(4),
        namespace=namespace,
        image=image,
        run_args=run_args,
        targets=tuple(request.targets),
        plan_text=plan_text,
        pull_policy=env.environ.get("HOWFAST_K8S_PULL_POLICY") or None,
        network=network,
        api_server=api_server,
        env={k: env.environ[k] for k in icm.PASSED_ENV if env.environ.get(k)},
    )
    if request.dry_run:
        return _print_job(env, plan, as_json)
    assert cluster is not None
    _check_namespace(cluster, plan)
    return _run(env, cluster, plan, store, as_json)


def _job_image(env: CliEnv, image: str | None) -> str:
    """--howfast-image, else $HOWFAST_K8S_HOWFAST_IMAGE; refused when neither is given or
    the image cannot be howfast's."""
    from howfast.targets.k8s.incluster_checks import image_refusal

    source = "--howfast-image" if image is not None else IMAGE_ENV
    image = image if image is not None else env.environ.get(IMAGE_ENV) or None
    if image is None:
        raise UsageError(
            f"--in-cluster needs the image of howfast the Job runs: --howfast-image IMAGE "
            f"(or {IMAGE_ENV})",
            "deploy/Dockerfile.howfast builds one",
        )
    why = image_refusal(image, source)
    if why is not None:
        raise UsageError(why)
    return image


def _cluster(context: str | None, network: str, dry_run: bool) -> tuple[Cluster | None, str | None]:
    """The cluster and its API server's address, when the Job's manifests need it (host
    network) or the run creates it; a dry run without a cluster shows a placeholder."""
    from howfast.targets.k8s.cluster import Cluster

    if network != "host" and dry_run:
        return None, None
    try:
        cluster = Cluster(context)
    except UsageError:
        if not dry_run:
            raise
        return None, "https://KUBERNETES-API-SERVER:6443"
    return cluster, cluster.host


def _print_job(env: CliEnv, plan: InClusterPlan, as_json: bool) -> int:
    """--dry-run: the objects the run would create, in order, and the Job's command."""
    from howfast.service.dryrun import to_yaml
    from howfast.targets.k8s import incluster_manifests as icm

    manifests = icm.all_manifests(plan)
    if as_json:
        env.print_json({"dry_run": True, "in_cluster": {"job": plan.name,
                        "namespace": plan.namespace, "manifests": manifests}})  # fmt: skip
    else:
        env.stdout.write(
            f"# howfast run --in-cluster: these objects are created in namespace "
            f"{plan.namespace}, in this order; the Job runs\n#   "
            f"{shlex.join(['howfast', 'run', *plan.run_args])}\n"
        )
        env.stdout.write(to_yaml(manifests))
        env.stdout.flush()
    return 0


def _read_plan(path: Path) -> str | None:
    """PLAN's text when it is a file here; None otherwise, or when it cannot be read (the
    run's checks then say why)."""
    try:
        return path.read_text() if path.is_file() else None
    except (OSError, UnicodeDecodeError):
        return None


def _refuse_credentials(
    run_args: Sequence[str], plan_file: Path, plan_text: str | None, namespace: str
) -> None:
    """Nothing the Job is given may carry a credential: its arguments go into its manifest,
    a plan file into its ConfigMap (targets/k8s/incluster_checks.py)."""
    from howfast.targets.k8s.incluster_checks import credential_refusal, plan_credential_refusal

    why = credential_refusal(run_args, namespace)
    if why is None and plan_text is not None:
        try:
            plan = tomllib.loads(plan_text)
        except tomllib.TOMLDecodeError:
            plan = {"text": plan_text}  # not TOML (the run's checks said what it is): its text
        why = plan_credential_refusal(plan, str(plan_file), namespace)
    if why is not None:
        raise UsageError(why)


def _check_namespace(cluster: Cluster, plan: InClusterPlan) -> None:
    """Refused before anything is created: a namespace that is not there, or one whose Pod
    Security level refuses the lab's host network mode."""
    from howfast.targets.k8s.network import pod_security_refusal

    if not cluster.namespace_exists(plan.namespace):
        raise UsageError(f"namespace {plan.namespace} does not exist (howfast creates none)")
    why = pod_security_refusal(
        plan.network, plan.namespace, cluster.namespace_labels(plan.namespace)
    )
    if why is not None:
        raise UsageError(why)


def _run(
    env: CliEnv, cluster: Cluster, plan: InClusterPlan, store: str | None, as_json: bool
) -> int:
    from howfast.targets.k8s import incluster

    incluster.create(cluster, plan)
    env.info(
        f"Job {plan.name} runs howfast in namespace {plan.namespace}. Ctrl-C deletes it; if "
        f"this terminal goes away it runs to its end, and `howfast fetch {plan.name} "
        f"--namespace {plan.namespace}` then stores its run here."
    )
    try:
        finished = incluster.follow(cluster, plan.namespace, plan.token, env.info)
    except incluster.NotStarted:
        _delete(env, cluster, plan.namespace, plan.token)
        raise
    except (KeyboardInterrupt, Aborted):
        env.info(f"interrupted: deleting Job {plan.name} (its run stops and tidies up)")
        _delete(env, cluster, plan.namespace, plan.token)
        raise
    except HowfastError as exc:
        raise HowfastError(
            f"{exc}; Job {plan.name} keeps running",
            f"`howfast fetch {plan.name} --namespace {plan.namespace}` stores its run later",
        ) from None
    return store_finished(env, cluster, plan.namespace, plan.token, finished, store, as_json)


def _delete(env: CliEnv, cluster: Cluster, namespace: str, token: str) -> None:
    from howfast.targets.k8s import incluster

    for warning in incluster.delete(cluster, namespace, token):
        env.info(f"warning: {warning}")


def store_finished(
    env: CliEnv,
    cluster: Cluster,
    namespace: str,
    token: str,
    finished: Finished,
    store: str | None,
    as_json: bool,
) -> int:
    """The run file of a finished Job into the store (as `howfast import run` does), then
    its objects deleted; the run printed as `howfast run` prints one."""
    from howfast.exports.restore import restore_run
    from howfast.exports.runfile import parse_run_file
    from howfast.report import terminal
    from howfast.service.reading import read_run, run_document
    from howfast.store.liveness import this_process
    from howfast.targets.k8s import incluster_manifests as icm

    name = icm.job_name(token)
    if finished.run_file is None:
        _delete(env, cluster, namespace, token)
        tail = "\n".join(f"  {line}" for line in finished.log_tail)
        raise HowfastError(
            f"Job {name} ended (exit code {finished.exit_code}) without a run; its last "
            f"lines:\n{tail}"
        )
    exported = parse_run_file(finished.run_file, f"the log of Job {name}")
    db = open_results(env, store)
    try:
        new_ids = [restore_run(db, item, writer=this_process().document()) for item in exported]
        runs = [read_run(db, rid) for rid in new_ids]
    finally:
        db.close()
    try:
        _delete(env, cluster, namespace, token)
    except HowfastError as exc:  # the run is stored: say what is left, fail nothing
        env.info(f"warning: {exc}; `howfast cleanup --k8s --force` removes Job {name}")
    if as_json:
        documents = [run_document(run) for run in runs if run is not None]
        env.print_json(documents[0] if len(documents) == 1 else documents)
    else:
        for run in runs:
            if run is not None:
                env.out.print(terminal.run_summary(run))
    for rid in new_ids:
        env.info(f"run {rid} stored (from Job {name}); see `howfast results show {rid}`")
    statuses = [run.status for run in runs if run is not None]
    return max(int(EXIT_FOR_STATUS.get(s, ExitStatus.ERROR)) for s in statuses or ["failed"])


@click.command("fetch")
@click.argument("job", metavar="JOB")
@click.option("--namespace", metavar="NS", help="The Job's namespace [default: the context's].")
@click.option("--kube-context", metavar="NAME", help="The kubeconfig context to use.")
@store_option
@json_option
@pass_env
def fetch_command(
    env: CliEnv,
    job: str,
    namespace: str | None,
    kube_context: str | None,
    store: str | None,
    as_json: bool,
) -> int:
    """Store the run of an in-cluster Job (`howfast run ... --in-cluster`) that finished
    without this machine following it, then delete the Job and what came with it. A Job that
    still runs is followed until it ends.

    \b
    Example:
      howfast fetch howfast-ic-3f2a9c01 --namespace bench
    """
    from howfast.targets.k8s import incluster
    from howfast.targets.k8s import incluster_manifests as icm
    from howfast.targets.k8s.cluster import Cluster, kubeconfig_namespace

    token = icm.token_of(job)
    namespace = namespace or kubeconfig_namespace(kube_context) or "default"
    cluster = Cluster(kube_context)
    if not incluster.exists(cluster, namespace, token):
        raise incluster.missing(namespace, job)
    finished = incluster.follow(cluster, namespace, token, env.info)
    return store_finished(env, cluster, namespace, token, finished, store, as_json)


@click.command(
    "in-cluster-job",
    hidden=True,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("run_args", nargs=-1, type=click.UNPROCESSED)
@pass_env
def in_cluster_job_command(env: CliEnv, run_args: tuple[str, ...]) -> int:
    """Inside the Job's pod: `howfast run RUN_ARGS` into the pod's scratch store, then every
    run of that store as a run file at the end of the log (targets/k8s/incluster_result.py),
    whatever the run's outcome: what completed is kept."""
    from howfast.cli import main
    from howfast.exports.runfile import export_document
    from howfast.targets.k8s import incluster_result

    status = main(["run", *run_args], env)
    db = open_results(env, None)
    try:
        runs = [db.get_run(summary.id, with_series=True) for summary in db.list_runs()]
        location = db.location
    finally:
        db.close()
    found = [run for run in runs if run is not None]
    if found:
        document = export_document(
            found, source_store=location, exported_at=env.clock.now(), howfast_version=__version__
        )
        text = json.dumps(document, separators=(",", ":")) + "\n"
        env.stderr.flush()
        env.stdout.write("\n".join(incluster_result.encode(text)) + "\n")
        env.stdout.flush()
    return status
