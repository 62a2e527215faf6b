"""`howfast run` of a plan with a `[fleet]`: many instances of one directory target at once,
in classes, scenario after scenario (docs/plans/fleet.md)."""

from __future__ import annotations

from pathlib import Path

from howfast.cli.context import CliEnv
from howfast.cli.fleet_progress import FleetProgressObserver
from howfast.cli.live_metrics import live_metrics
from howfast.cli.output import finish
from howfast.cli.stores import open_results
from howfast.dryrun import plan_document, write_text
from howfast.errors import UsageError
from howfast.metrics.live import LINGER_S
from howfast.model import StepSpec
from howfast.plans import Plan
from howfast.runner.fanout import FanOut
from howfast.runner.fleet import FleetRunner
from howfast.targets.fleet import fleet_device, scenario_members
from howfast.targets.pgbin import PgInstall
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
) -> int:
    assert plan.fleet is not None
    if len(targets) != 1 or kind_for(targets[0]).name != "local":
        raise UsageError(
            "a fleet runs on one directory target: its instances live in subdirectories of it",
            "give one --target DIR",
        )
    directory = Path(targets[0]).expanduser()
    scenarios = plan.fleet.all_scenarios()
    if dry_run:
        device = fleet_device(directory)
        workspace = directory.absolute() / "howfast-fleet-XXXXXXXX"
        members = [
            member
            for scenario in scenarios
            for member in scenario_members(
                workspace,
                directory.absolute(),
                scenario,
                install,
                device=None if isinstance(device, str) else device,
                settings=settings,
                checksums=checksums,
            )
        ]
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
        directory,
        scenarios,
        steps,
        plan_name=plan.name,
        install=install,
        observer=FanOut(progress, live) if live else progress,
        settings=settings,
        checksums=checksums,
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
