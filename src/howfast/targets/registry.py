"""Target kinds, found rather than listed: every module of howfast.targets.kinds defines a
module-level `KIND` (a TargetKind, targets/kind.py) that says how a `--target` text is
recognised, which options it takes, and makes the Target. Adding a target kind is one new
module there (plus the Target itself), or a distribution of its own with an entry point in
the `howfast.targets` group (found as workloads are: plugin/discovery.py). The functions
below are what a command asks of the kinds of its targets, without naming any kind.

    values = {"namespace": "bench", "storage_latency": None, ...}      # from the CLI
    kind_options = parse_kind_options(values, OptionContext("run", texts, memory, plan))
    options = TargetOptions(install, ..., kind_options=kind_options)
    refuse(texts, RunShape(until=True))                                 # UsageError, or nothing
    targets = make_targets(texts, options)
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from howfast.errors import UsageError
from howfast.plugin.discovery import Discovery, discover
from howfast.targets.kind import (
    Command,
    LocalInstall,
    OptionContext,
    OptionSpec,
    RunShape,
    TargetKind,
    TargetOptions,
)

if TYPE_CHECKING:
    from howfast.checks import Check
    from howfast.targets.base import Target
    from howfast.targets.fleet_base import FleetPlace


def _name(kind: TargetKind) -> str:
    return kind.name


DISCOVERY = Discovery(
    noun="target kind",
    cls=TargetKind,
    package="howfast.targets.kinds",
    attribute="KIND",
    group="howfast.targets",  # kinds installed apart: [project.entry-points."howfast.targets"]
    name_of=_name,
)


@functools.cache
def kinds() -> tuple[TargetKind, ...]:
    """Every target kind, built in or installed apart, in their order."""
    found = discover(DISCOVERY)
    return tuple(sorted(found.values(), key=lambda k: (k.order, k.name)))


def kind_for(text: str) -> TargetKind:
    """The kind of target `text` names; UsageError when none recognises it."""
    for kind in kinds():
        if kind.matches(text):
            return kind
    # The most general kind (the fallback, tried last) first: "a directory or a ... URI".
    usages = " or ".join(k.usage for k in reversed(kinds()) if k.usage)
    raise UsageError(f"unknown target {text!r}: give {usages}")


def kind_options(command: Command) -> list[tuple[TargetKind, OptionSpec]]:
    """Every kind's options that `command` has, for the CLI to declare (kinds in order;
    two kinds declaring one flag is a programming error)."""
    out: list[tuple[TargetKind, OptionSpec]] = []
    seen: dict[str, str] = {}
    for kind in kinds():
        for option in kind.options:
            if command not in option.commands:
                continue
            if option.flag in seen or option.name in seen.values():
                raise RuntimeError(f"{option.flag} is declared by two target kinds")
            seen[option.flag] = option.name
            out.append((kind, option))
    return out


def parse_kind_options(values: Mapping[str, str | None], ctx: OptionContext) -> dict[str, object]:
    """Each kind's parsed options, by kind name (for TargetOptions.kind_options); UsageError
    for an option given where no target can take it."""
    parsed: dict[str, object] = {}
    for kind in kinds():
        mine = {o.name: values.get(o.name) for o in kind.options if ctx.command in o.commands}
        found = kind.parse_options(mine, ctx)
        if found is not None:
            parsed[kind.name] = found
    return parsed


def kinds_of(texts: Sequence[str]) -> list[TargetKind]:
    """The distinct kinds of `texts`, in the kinds' order."""
    named = {kind_for(text).name for text in texts}
    return [kind for kind in kinds() if kind.name in named]


def local_install(texts: Sequence[str]) -> LocalInstall:
    """What of PostgreSQL a run on `texts` needs on this machine: "server" when a kind makes
    clusters here, "none" when every tool runs elsewhere, else "client"."""
    needs = {kind.local_install for kind in kinds_of(texts)}
    if "server" in needs:
        return "server"
    return "none" if needs == {"none"} else "client"


def refuse(texts: Sequence[str], shape: RunShape) -> None:
    """UsageError when a kind of `texts` cannot do what the run asks (`--until`...)."""
    for kind in kinds_of(texts):
        kind.refuse(shape)


def make_targets(texts: Sequence[str], options: TargetOptions) -> list[Target]:
    """The targets of a run, in the order given (a directory's variants side by side)."""
    for text in texts:  # before anything is made: the design options each kind refuses
        kind_for(text).refuse_design(text, options.design)
    return [target for text in texts for target in kind_for(text).create(text, options)]


def probe_target(text: str, options: TargetOptions) -> Target:
    """What `howfast probe TEXT` measures."""
    return kind_for(text).probe_target(text, options)


def fleet_place(
    texts: Sequence[str], options: TargetOptions, *, planned: bool = False
) -> FleetPlace:
    """Where a [fleet] plan's instances live: one target, of a kind that holds fleets."""
    able = [kind for kind in reversed(kinds()) if kind.fleet_usage]
    if len(texts) == 1 and kind_for(texts[0]).fleet_usage:
        return kind_for(texts[0]).fleet(texts[0], options, planned=planned)
    raise UsageError(
        "a fleet runs on one target: " + " or ".join(kind.fleet_usage for kind in able),
        "give one " + " or ".join(kind.fleet_example for kind in able),
    )


def housekeeping(texts: Sequence[str]) -> list[str]:
    """Each kind's tidying before a run on `texts`, one line per thing done."""
    return [line for kind in kinds_of(texts) for line in kind.housekeeping()]


def kind_checks() -> list[Check]:
    """Every kind's doctor checks, the most general kind first (directories: this machine;
    then k8s://: the cluster)."""
    return [check for kind in reversed(kinds()) for check in kind.doctor_checks()]
