"""`howfast run` of a plan with a `[fleet]`: many instances of one target at once (a
directory, or a k8s:// StorageClass), in classes, scenario after scenario
(docs/plans/fleet.md)."""

from __future__ import annotations

from howfast.cli.context import CliEnv
from howfast.cli.fleet_progress import FleetProgressObserver
from howfast.cli.live_metrics import live_metrics
from howfast.cli.output import finish
from howfast.cli.stores import open_results
from howfast.errors import UsageError
from howfast.metrics.live import LINGER_S
from howfast.model import StepSpec
from howfast.plans import Plan
from howfast.runner.fanout import FanOut
from howfast.runner.fleet import FleetRunner
from howfast.service.dryrun import plan_document, write_text
from howfast.targets.kind import TargetOptions
from howfast.targets.registry import fleet_place


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
    options: TargetOptions,
    *,
    store: str | None,
    label: str | None,
    dry_run: bool,
    as_json: bool,
    metrics: tuple[int | None, str | None] = (None, None),
) -> int:
    assert plan.fleet is not None
    scenarios = plan.fleet.all_scenarios()
    place = fleet_place(targets, options, planned=dry_run)
    place.check_plan(scenarios)  # before a dry run too: what the plan alone refuses
    install = options.install
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
