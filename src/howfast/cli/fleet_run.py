"""`howfast run` of a plan with a `[fleet]`: many instances of one directory target at once,
in classes, scenario after scenario (docs/plans/fleet.md)."""

from __future__ import annotations

from pathlib import Path

from howfast.cli.context import CliEnv
from howfast.cli.fleet_progress import FleetProgressObserver
from howfast.cli.output import finish
from howfast.cli.stores import open_results
from howfast.dryrun import plan_document, write_text
from howfast.errors import UsageError
from howfast.model import StepSpec
from howfast.plans import Plan
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
    observer = FleetProgressObserver(env)
    runner = FleetRunner(
        db,
        directory,
        scenarios,
        steps,
        plan_name=plan.name,
        install=install,
        observer=observer,
        settings=settings,
        checksums=checksums,
        label=label,
    )
    try:
        result = runner.execute()
    finally:
        observer.close()
    return finish(env, db, result, as_json)
