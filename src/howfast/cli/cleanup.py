"""`howfast cleanup`: list and remove what killed runs left in a Kubernetes cluster."""

from __future__ import annotations

import sys

import click

from howfast.cli.context import CliEnv
from howfast.cli.options import json_option
from howfast.errors import UsageError


@click.command("cleanup")
@click.option(
    "--namespace",
    metavar="NS",
    help="Only this namespace [default: every namespace howfast's objects are in].",
)
@click.option("--kube-context", metavar="NAME", help="The kubeconfig context to use.")
@click.option("--yes", is_flag=True, help="Remove without asking.")
@click.option(
    "--force",
    is_flag=True,
    help="Also remove runs started on another machine (howfast cannot see whether they still run).",
)
@json_option
def cleanup_command(
    namespace: str | None, kube_context: str | None, yes: bool, force: bool, as_json: bool
) -> int:
    """Remove what killed runs left in the cluster: pods, volumes, config maps and secrets
    labelled app.kubernetes.io/managed-by=howfast whose howfast process is gone.

    Nothing without howfast's labels is touched, and no namespace is deleted. Runs of a
    howfast process that still runs are listed and left alone.

    \b
    Examples:
      howfast cleanup                    # list, then ask
      howfast cleanup --namespace bench --yes
    """
    from howfast.targets.k8s.cleanup import find, remove
    from howfast.targets.k8s.cluster import Cluster

    env = CliEnv()
    cluster = Cluster(kube_context)
    runs = find(cluster, namespace)
    removable = [r for r in runs if r.state == "gone" or (force and r.state == "unknown")]
    if not as_json:
        if not runs:
            env.out.print("nothing of howfast's in the cluster", markup=False)
        for run in runs:
            what = ", ".join(f"{kind} {name}" for kind, name in run.objects)
            verdict = {
                "gone": "left by a run that no longer runs",
                "running": f"its howfast still runs ({run.writer}): left alone",
                "unknown": f"started elsewhere ({run.writer or 'unknown'}): "
                + ("removed (--force)" if force else "left alone without --force"),
            }[run.state]
            env.out.print(
                f"{run.namespace}/{run.token} {run.target or ''}: {verdict}\n  {what}",
                markup=False,
            )
    removed = []
    warnings: list[str] = []
    if removable:
        if not yes:
            if as_json or not sys.stdin.isatty():
                raise UsageError(f"{len(removable)} run(s) to remove: pass --yes to remove them")
            if not click.confirm(f"remove {len(removable)} run(s)?", default=False):
                return 1
        for run in removable:
            warnings += remove(cluster, run)
            removed.append(run)
            if not as_json:
                env.out.print(f"removed {run.namespace}/{run.token}", markup=False)
    for warning in warnings:
        env.info(f"warning: {warning}")
    if as_json:
        env.print_json(
            {
                "runs": [
                    {
                        "namespace": r.namespace,
                        "run": r.token,
                        "target": r.target,
                        "state": r.state,
                        "objects": [{"kind": k, "name": n} for k, n in r.objects],
                        "removed": r in removed,
                    }
                    for r in runs
                ],
                "warnings": list(warnings),
            }
        )
    return 0
