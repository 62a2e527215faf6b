"""The actions this version can apply, one module per action in this package, each with a
module-level `ACTION` (like the samplers' plug-ins)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from functools import cache

from howfast import events
from howfast.events.base import EventAction

# Actions of the grammar (eventspec.ACTIONS) that no module applies yet, with why: an event
# naming one is refused before anything starts.
NOT_YET: Mapping[str, str] = {}


@cache
def actions() -> Mapping[str, EventAction]:
    found: dict[str, EventAction] = {}
    for info in pkgutil.iter_modules(events.__path__):
        module = importlib.import_module(f"{events.__name__}.{info.name}")
        action = getattr(module, "ACTION", None)
        if isinstance(action, EventAction):
            found[action.name] = action
    return found
