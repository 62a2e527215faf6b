"""`howfast cleanup`: list and remove what killed runs left, on this machine and in a
Kubernetes cluster."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from howfast.cli.context import CliEnv, pass_env
from howfast.cli.options import json_option
from howfast.errors import HowfastError, UsageError
from howfast.model import JSONValue

if TYPE_CHECKING:
    from rich.text import Text

    from howfast.targets.k8s.cleanup import RunObjects
    from howfast.targets.k8s.cluster import Cluster
    from howfast.targets.leftovers.find import Leftover
    from howfast.targets.leftovers.machine import Snapshot


@dataclass
class K8sPart:
    skipped: str | None = None
    cluster: Cluster | None = None
    runs: list[RunObjects] = field(default_factory=list)
    removable: list[RunObjects] = field(default_factory=list)
    removed: list[RunObjects] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@click.command("cleanup")
@click.option(
    "--target",
    "targets",
    metavar="DIR",
    multiple=True,
    help="Only what runs on this directory left (repeatable) [default: all of this machine].",
)
@click.option(
    "--pid",
    "owner_pid",
    metavar="PID",
    type=click.IntRange(min=1),
    help="Only what the howfast process PID left (a killed run's; `$!` in a script).",
)
@click.option("--local", "local_only", is_flag=True, help="Only this machine, not the cluster.")
@click.option("--k8s", "k8s_only", is_flag=True, help="Only the Kubernetes cluster.")
@click.option(
    "--namespace",
    metavar="NS",
    help="Only this namespace [default: every namespace howfast's objects are in].",
)
@click.option("--kube-context", metavar="NAME", help="The kubeconfig context to use.")
@click.option("--yes", is_flag=True, help="Remove (and stop servers) without asking.")
@click.option(
    "--force",
    is_flag=True,
    help="Also remove runs started on another machine (howfast cannot see whether they still run).",
)
@json_option
@pass_env
def cleanup_command(
    env: CliEnv,
    targets: tuple[str, ...],
    owner_pid: int | None,
    local_only: bool,
    k8s_only: bool,
    namespace: str | None,
    kube_context: str | None,
    yes: bool,
    force: bool,
    as_json: bool,
) -> int:
    """Find and remove what killed runs (SIGKILL, the OOM killer, a test's time-out) left.

    On this machine: emulated volumes (nbdkit, nbdfuse, loop device, mounts, image), cluster
    and standby directories, private directories in /dev/shm, empty cgroups, the shared
    memory of killed servers, and a server still running (listed with the command that
    stops it; howfast stops it only with --yes). Each run records what it makes, before it
    makes it, in ~/.local/state/howfast/owned: what a killed run left is found whatever it
    was doing. In a Kubernetes
    cluster: pods, volumes, config maps and secrets labelled
    app.kubernetes.io/managed-by=howfast.

    Only what carries howfast's marks is touched, and only when the howfast process that made
    it is gone: a live run's things are listed and left alone, as are clusters kept with --keep.
    Without --yes nothing is changed: it lists what it would remove (and asks, on a terminal).

    \b
    Examples:
      howfast cleanup                        # list, then ask
      howfast cleanup --target /mnt/a --yes  # what runs on /mnt/a left
      howfast cleanup --local --pid 4242 --yes  # what the killed howfast 4242 left
      howfast cleanup --k8s --namespace bench --yes
    """
    parts = choose_parts(targets, local_only, k8s_only, namespace, kube_context, owner_pid)
    given = [_target_dir(t) for t in targets]
    local: list[Leftover] | None = None
    snapshot: Snapshot | None = None
    if parts.local_skipped is None:
        from howfast.targets.leftovers.find import candidate_directories, find
        from howfast.targets.leftovers.machine import read_snapshot

        snapshot = read_snapshot(candidate_directories, given)
        local = find(snapshot, [str(g) for g in given] if given else None, owner_pid)
    k8s = _k8s_part(parts, namespace, kube_context, force, env.environ)
    local_removable = [x for x in local or [] if x.removable]
    count = len(local_removable) + len(k8s.removable)
    if not as_json:
        _print_listing(env, local, k8s, force)
    proceed = yes
    if count and not yes:
        if as_json or not env.input_is_terminal():
            env.info(f"{count} to remove: nothing was changed; pass --yes to remove them")
        elif click.confirm(f"remove {count}?", default=False):
            proceed = True
        else:
            return 1
    if count and proceed:
        if local_removable:
            from howfast.targets.leftovers.remove import remove

            remove(local_removable)
        if k8s.cluster is not None:
            _remove_k8s(env, k8s, as_json)
        if not as_json:
            _print_results(env, local_removable)
    if proceed and snapshot is not None:  # the registry files of runs with nothing left go
        from howfast.targets.leftovers.remove import forget_finished

        forget_finished(snapshot.registry)
    for warning in k8s.warnings:
        env.info(f"warning: {warning}")
    if as_json:
        env.print_json(_document(local, k8s, parts))
    failed = [x for x in local_removable if x.error]
    return 1 if failed else 0


@dataclass(frozen=True)
class Parts:
    local_skipped: str | None  # why this machine is not looked at; None: it is
    k8s_skipped: str | None  # why the cluster is not
    k8s_asked: bool  # the cluster was asked for by an option: its errors are errors


def choose_parts(
    targets: tuple[str, ...],
    local_only: bool,
    k8s_only: bool,
    namespace: str | None,
    kube_context: str | None,
    pid: int | None = None,
) -> Parts:
    """--local and --k8s choose a part; --target and --pid narrow this machine's part and
    --namespace the cluster's, and one of them alone means only its part."""
    if local_only and k8s_only:
        raise UsageError("--local and --k8s exclude each other: give neither for both")
    if k8s_only and targets:
        raise UsageError("--target names directories of this machine: not with --k8s")
    if k8s_only and pid is not None:
        raise UsageError("--pid names a process of this machine: not with --k8s")
    if local_only and (namespace or kube_context):
        raise UsageError("--namespace and --kube-context are the cluster's: not with --local")
    if local_only:
        return Parts(None, "--local", False)
    if k8s_only:
        return Parts("--k8s", None, True)
    if targets and not (namespace or kube_context):
        return Parts(None, "--target limits cleanup to directories of this machine", False)
    if pid is not None and not (namespace or kube_context):
        return Parts(None, "--pid limits cleanup to a process of this machine", False)
    if namespace and not targets and pid is None:
        return Parts("--namespace limits cleanup to the cluster", None, True)
    return Parts(None, None, bool(namespace or kube_context))


def _target_dir(text: str) -> Path:
    if not text.strip():
        raise UsageError("--target is empty (an unset shell variable?)")
    path = Path(text).expanduser().absolute()
    if not path.is_dir():
        raise UsageError(f"--target {text}: no such directory")
    return path


def kubeconfig_missing(environ: Mapping[str, str]) -> str | None:
    """Why no cluster is configured here, without importing the client: None when one may be."""
    if environ.get("KUBECONFIG") or environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    if (Path.home() / ".kube" / "config").exists():
        return None
    return "no Kubernetes cluster is configured (no KUBECONFIG, no ~/.kube/config)"


def _k8s_part(
    parts: Parts,
    namespace: str | None,
    kube_context: str | None,
    force: bool,
    environ: Mapping[str, str],
) -> K8sPart:
    if parts.k8s_skipped is not None:
        return K8sPart(skipped=parts.k8s_skipped)
    missing = kubeconfig_missing(environ)
    if missing and not parts.k8s_asked:
        return K8sPart(skipped=missing)
    from howfast.targets.k8s.cleanup import find
    from howfast.targets.k8s.cluster import Cluster

    try:
        cluster = Cluster(kube_context)
        runs = find(cluster, namespace)
    except HowfastError as exc:
        if parts.k8s_asked:
            raise
        return K8sPart(skipped=f"the cluster could not be read: {exc}")
    removable = [r for r in runs if r.state == "gone" or (force and r.state == "unknown")]
    return K8sPart(cluster=cluster, runs=runs, removable=removable)


def _remove_k8s(env: CliEnv, k8s: K8sPart, as_json: bool) -> None:
    from howfast.targets.cnpg.cleanup import drop_left
    from howfast.targets.k8s.cleanup import remove

    assert k8s.cluster is not None
    for run in k8s.removable:
        # a cnpg:// run's database first, while its owner Secret still names the target
        k8s.warnings += drop_left(k8s.cluster, run.namespace, run.token, run.target)
        k8s.warnings += remove(k8s.cluster, run)
        k8s.removed.append(run)
        if not as_json:
            env.out.print(f"removed {run.namespace}/{run.token}", markup=False)


# -- output ----------------------------------------------------------------------------------
def _action(leftover: Leftover) -> str:
    if leftover.removed:
        return "stopped" if leftover.kind in ("server", "tool") else "removed"
    if leftover.error:
        return f"failed: {leftover.error}"
    if not leftover.removable:
        return "left alone"
    return "stop (--yes)" if leftover.kind in ("server", "tool") else "remove (--yes)"


def _shown(text: str) -> Text:
    """Plain text in a cell: no markup, and a control character shown as an escape."""
    from rich.text import Text

    return Text("".join(c if c.isprintable() or c == "\n" else repr(c)[1:-1] for c in text))


def _state(leftover: Leftover) -> str:
    reason = leftover.reason
    return reason if reason.startswith(leftover.state) else f"{leftover.state}: {reason}"


def _removal_table(leftovers: list[Leftover], title: str) -> object:
    """What killed runs left, in full: each part, and how to stop a server by hand."""
    from rich.table import Table

    table = Table(title=title, title_justify="left", expand=True)
    table.add_column("what", no_wrap=True)
    table.add_column("where", overflow="fold", ratio=3)
    table.add_column("state", overflow="fold", ratio=2)
    table.add_column("action", overflow="fold", ratio=1)
    for x in leftovers:
        lines = [x.path, *x.details]
        if x.stop_command:
            lines.append(f"stop it by hand: {x.stop_command}")
        table.add_row(x.kind, _shown("\n".join(lines)), _shown(_state(x)), _shown(_action(x)))
    return table


def _left_alone_table(leftovers: list[Leftover]) -> object:
    """What is left alone, one line each: live runs' things, kept clusters, the unknown."""
    from rich.table import Table

    table = Table(title="left alone", title_justify="left", expand=True)
    table.add_column("what", no_wrap=True)
    table.add_column("where", overflow="fold", ratio=3)
    table.add_column("why", overflow="fold", ratio=2)
    for x in leftovers:
        table.add_row(x.kind, _shown(x.path), _shown(_state(x)))
    return table


def _print_listing(env: CliEnv, local: list[Leftover] | None, k8s: K8sPart, force: bool) -> None:
    if local is not None:
        gone = [x for x in local if x.removable]
        alone = [x for x in local if not x.removable]
        if gone:
            title = f"this machine: {len(gone)} left by killed runs"
            env.out.print(_removal_table(gone, title))
        else:
            env.out.print("this machine: nothing left by killed runs", markup=False)
        if alone:
            env.out.print(_left_alone_table(alone))
    if k8s.skipped is not None:
        env.info(f"Kubernetes: skipped: {k8s.skipped}")
        return
    if not k8s.runs:
        env.out.print("nothing of howfast's in the cluster", markup=False)
    for run in k8s.runs:
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


def _print_results(env: CliEnv, done: list[Leftover]) -> None:
    if done:
        failed = sum(1 for x in done if x.error)
        title = f"this machine: {len(done) - failed} removed" + (
            f", {failed} could not be" if failed else ""
        )
        env.out.print(_removal_table(done, title))


def _document(local: list[Leftover] | None, k8s: K8sPart, parts: Parts) -> JSONValue:
    return {
        "runs": [
            {
                "namespace": r.namespace,
                "run": r.token,
                "target": r.target,
                "state": r.state,
                "objects": [{"kind": k, "name": n} for k, n in r.objects],
                "removed": r in k8s.removed,
            }
            for r in k8s.runs
        ],
        "warnings": list(k8s.warnings),
        "kubernetes": {"skipped": k8s.skipped},
        "local": {
            "skipped": parts.local_skipped,
            "leftovers": [
                {
                    "kind": x.kind,
                    "path": x.path,
                    "run": x.run,
                    "state": x.state,
                    "reason": x.reason,
                    "details": list(x.details),
                    "stop_command": x.stop_command,
                    "removed": x.removed,
                    "error": x.error,
                }
                for x in local or []
            ],
        },
    }
