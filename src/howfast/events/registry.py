"""The actions this version can apply: one module per action in this package, each with a
module-level `ACTION` (like the samplers' plug-ins), or installed apart by a distribution's
entry point in the `howfast.events` group. Found once, by the plug-in layer
(plugin/events.py, through plugin/discovery.py: two actions of one name are refused, naming
both), which also gives their syntax to the parser and `--event`'s help; here they are what
applies them."""

from __future__ import annotations

from collections.abc import Mapping

from howfast.errors import HowfastError
from howfast.events.base import EventAction
from howfast.plugin import events as declared_events


def actions() -> Mapping[str, EventAction]:
    """Every action, by name, in their declared order."""
    found = declared_events.declared()
    for name, action in found.items():
        if not isinstance(action, EventAction):
            raise HowfastError(f"event action {name!r} is not an EventAction: {action!r}")
    return {name: action for name, action in found.items() if isinstance(action, EventAction)}


def reset() -> None:
    """Forget the actions found (a test that installs one)."""
    declared_events.reset()
