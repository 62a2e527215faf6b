"""The event actions' syntax, as their modules declare it: what the parser, `--event`'s help
and the readers of a run are given (docs/events.md, docs/architecture.md).

Each action is a module of `howfast.events` with a module-level `ACTION` (or an object an
installed distribution names in the `howfast.events` entry-point group) that has a `syntax`,
an `eventspec.ActionSyntax`: its name, its kind of value, whether it takes `for=`, whether it
cuts the server's connections, its place in the help. This layer finds them by name, through
the one discovery (plugin/discovery.py), without an import statement: the actions sit above
it. No list here names an action. events/registry.py holds what they do.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Protocol, runtime_checkable

from howfast import eventspec
from howfast.eventspec import ActionSyntax, EventSpec
from howfast.plugin.discovery import Discovery, discover


@runtime_checkable
class DeclaresSyntax(Protocol):
    """What an event action is to this layer: the way it is written."""

    @property
    def syntax(self) -> ActionSyntax: ...


def _name(action: DeclaresSyntax) -> str:
    return action.syntax.name


DISCOVERY: Discovery[DeclaresSyntax] = Discovery(
    noun="event action",
    cls=DeclaresSyntax,
    package="howfast.events",
    attribute="ACTION",
    group="howfast.events",  # actions installed apart: [project.entry-points."howfast.events"]
    name_of=_name,
)


@cache
def declared() -> Mapping[str, DeclaresSyntax]:
    """Every event action, by name, in the order of their help (`ActionSyntax.order`)."""
    found = discover(DISCOVERY)
    ordered = eventspec.in_order(a.syntax for a in found.values())
    return {s.name: found[s.name] for s in ordered}


def reset() -> None:
    """Forget the actions found (a test that installs one)."""
    declared.cache_clear()
    action_syntaxes.cache_clear()


@cache
def action_syntaxes() -> Mapping[str, ActionSyntax]:
    return {name: action.syntax for name, action in declared().items()}


def grammar() -> str:
    return eventspec.grammar(action_syntaxes())


def event_help() -> str:
    """`howfast run --event`'s help, listing every action."""
    return eventspec.event_help(action_syntaxes())


def disturbs_service(action: str) -> bool:
    """Whether an action cuts the server's connections (restart, crash, failover...); False
    for one this version does not know (a run recorded with an action since removed)."""
    syntax = action_syntaxes().get(action)
    return syntax is not None and syntax.disturbs_service


def may_disturb_service(action: str) -> bool:
    """Whether an action may cut the server's connections: it does, or its effect is not
    known (a user's command)."""
    syntax = action_syntaxes().get(action)
    return syntax is not None and (syntax.disturbs_service or syntax.may_disturb_service)


def gives_new_address(action: str) -> bool:
    """Whether the server comes back at a new address after the action (a pod made again)."""
    syntax = action_syntaxes().get(action)
    return syntax is not None and syntax.new_address


def event_from_text(text: str) -> EventSpec:
    return eventspec.event_from_text(text, action_syntaxes())


def event_from_table(table: Mapping[str, object]) -> EventSpec:
    return eventspec.event_from_table(table, action_syntaxes())


def plan_event(value: object) -> EventSpec:
    return eventspec.plan_event(value, action_syntaxes())


def parse_event(text: str, option: str = "--event") -> EventSpec:
    return eventspec.parse_event(text, action_syntaxes(), option)
