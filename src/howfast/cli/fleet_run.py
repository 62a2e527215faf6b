"""`howfast run` of a plan with a `[fleet]`: many instances of one target at once (a
directory, or a k8s:// StorageClass), in classes, scenario after scenario
(docs/plans/fleet.md)."""

from __future__ import annotations

from pathlib import Path

from howfast.cli.context import CliEnv
from howfast.cli.fleet_progress import FleetProgressObserver
from howfast.cli.live_metrics import live_metrics
from howfast.cli.output import finish
from howfast.cli.stores import open_results
from howfast.errors import UsageError
from howfast.machine.pgbin import PgInstall
from howfast.metrics.live import LINGER_S
from howfast.model import StepSpec
from howfast.plans import Plan
from howfast.runner.fanout import FanOut
from howfast.runner.fleet import FleetRunner
from howfast.service.dryrun import plan_document, write_text
from howfast.targets.fleet import LocalFleet
from howfast.targets.fleet_base import FleetPlace
from howfast.targets.k8s.fleet import K8sFleet, check_classes
from howfast.targets.k8s.spec import K8sOptions, parse_target
from howfast.targets.registry import kind_for


def refuse_with_fleet(**given: object) -> None:
    """Options that do not combine with a fleet (yet), each refused by name."""
    named = [name for name, value in given.items() if value]
    if named:
        options = ", ".join(f"--{n.replace('_', '-')}" for n in named)
        raise UsageError(f"a fleet plan cannot be combined with {options} (yet)")


def run_fleet(
    env: CliEnv,
    plan: Plan,
    steps: list[StepSpec],
    targets: tuple[str, ...],
    install: PgInstall,
    *,
    settings: dict[str, str],
    checksums: bool,
    store: str | None,
    label: str | None,
    dry_run: bool,
    as_json: bool,
    metrics: tuple[int | None, str | None] = (None, None),
    kubernetes: K8sOptions | None = None,
) -> int:
    assert plan.fleet is not None
    scenarios = plan.fleet.all_scenarios()
    place = fleet_place(targets, install, settings, checksums, kubernetes, dry_run=dry_run)
    if isinstance(place, K8sFleet):
        check_classes(scenarios)  # before a dry run too: no cluster needed to refuse
    if dry_run:
        members = [m for s in scenarios for m in place.members(s, planned=True)]
        document = plan_document(members, steps, install)
        if as_json:
            env.print_json(document)
        else:
            write_text(document, "howfast run", env.stdout)
        return 0
    db = open_results(env, store)
    progress = FleetProgressObserver(env)
    live = live_metrics(env, plan.name, *metrics)  # labelled by class
    runner = FleetRunner(
        db,
        place,
        scenarios,
        steps,
        plan_name=plan.name,
        install=install,
        observer=FanOut(progress, live) if live else progress,
        label=label,
    )
    linger_s = 0.0
    try:
        result = runner.execute()
        linger_s = LINGER_S if result.status != "aborted" else 0.0
    finally:
        progress.close()
        if live:
            live.close(linger_s=linger_s)
    return finish(env, db, result, as_json)


def fleet_place(
    targets: tuple[str, ...],
    install: PgInstall,
    settings: dict[str, str],
    checksums: bool,
    kubernetes: K8sOptions | None,
    *,
    dry_run: bool,
) -> FleetPlace:
    """Where the fleet's instances live: subdirectories of a directory, or pods of a cluster."""
    kind = kind_for(targets[0]).name if len(targets) == 1 else None
    if kind == "k8s" and kubernetes is not None:
        return K8sFleet(parse_target(targets[0]), kubernetes, settings=settings,
                        checksums=checksums)  # fmt: skip
    if kind != "local":
        raise UsageError(
            "a fleet runs on one target: a directory (its instances live in subdirectories of "
            "it) or a k8s:// StorageClass (one pod each)",
            "give one --target DIR or --target k8s://CLASS",
        )
    directory = Path(targets[0]).expanduser()
    return LocalFleet(directory, install, settings=settings, checksums=checksums,
                      token="XXXXXXXX" if dry_run else None)  # fmt: skip
