"""The actions this version can apply, one module per action in this package, each with a
module-level `ACTION` (like the samplers' plug-ins), or installed apart by a distribution's
entry point in the `howfast.events` group (found as workloads are: plugin/discovery.py; two
actions of one name are refused, naming both)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

from howfast.events.base import EventAction
from howfast.plugin.discovery import Discovery, discover

# Actions of the grammar (eventspec.ACTIONS) that no module applies yet, with why: an event
# naming one is refused before anything starts.
NOT_YET: Mapping[str, str] = {}


def _name(action: EventAction) -> str:
    return action.name


DISCOVERY = Discovery(
    noun="event action",
    cls=EventAction,
    package="howfast.events",
    attribute="ACTION",
    group="howfast.events",  # actions installed apart: [project.entry-points."howfast.events"]
    name_of=_name,
)


@cache
def actions() -> Mapping[str, EventAction]:
    return discover(DISCOVERY)
