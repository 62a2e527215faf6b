"""Turning a validated plan (and the command line's overrides) into the list of steps to run.

Each workload expands its own steps (its plugin's `expand`, plugin/workload.py); this module
only walks the plan in order, carrying what one step tells the next (the scale a pgbench-init
step loads). Pure: no I/O, no clock, no CPU count. The params dicts are the stable JSON
contract described in docs/plans/format.md.
"""

from __future__ import annotations

import dataclasses
import json

from howfast.errors import UsageError
from howfast.model import StepSpec
from howfast.plans.model import Plan
from howfast.plans.until import Block
from howfast.plugin import registry
from howfast.plugin.overrides import Overrides
from howfast.plugin.workload import ExpandContext


def expand(plan: Plan, overrides: Overrides | None = None) -> list[StepSpec]:
    """The steps of `plan` in order. Within a pgbench step: for each mode, for each client
    count, each repetition. Measuring steps run `repeat` times; pgbench-init runs once."""
    overrides = overrides or Overrides()
    for plugin in registry.plugins().values():
        plugin.check_overrides(overrides)
    # The scale later steps record: the override, else the latest pgbench-init above them.
    ctx = ExpandContext(
        overrides,
        overrides.repeat or plan.repeat,
        scale=overrides.scale,
        trials=overrides.trials or plan.trials,
    )
    specs: list[StepSpec] = []
    for step in plan.steps:
        specs += registry.plugin(step.workload).expand(step, ctx)
    return specs


def effective_settings(plan: Plan, overrides: Overrides | None = None) -> dict[str, str]:
    """postgresql.conf settings for a cluster howfast creates: the plan's, then `--set`."""
    return {**plan.settings, **(overrides.settings if overrides else {})}


def expand_blocks(plan: Plan, overrides: Overrides | None = None) -> list[Block]:
    """The plan's steps for an `--until` run: each once, the measuring tests (the steps
    `repeat` repeats) marked to be repeated until the rule stops them. Found by expanding
    with one and with two repetitions: whatever comes back twice is a test."""
    overrides = overrides or Overrides()
    once = expand(plan, dataclasses.replace(overrides, repeat=1))
    twice = expand(plan, dataclasses.replace(overrides, repeat=2))
    curves = [s for s in once if "rate_fraction" in s.params or "curve_role" in s.params]
    if curves:
        raise UsageError(
            "--until cannot repeat a rate curve (its points are taken of a maximum measured "
            "before them): use --repeat for this plan"
        )

    def key(spec: StepSpec) -> str:
        return json.dumps([spec.workload, spec.params], sort_keys=True, default=str)

    repeated = {key(s) for s in twice if s.repetition == 2}
    return [Block(spec, key(spec) in repeated) for spec in once]
