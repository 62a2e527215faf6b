"""Target kinds, found rather than listed: every module of howfast.targets.kinds defines a
module-level `KIND` (a TargetKind, targets/kind.py) that says how a `--target` text is
recognised and makes the Target. Adding a target kind is one new module there (plus the
Target itself).

    kind = kind_for("postgresql://bench@db/bench")    # the dsn kind
    target = kind.create(text, TargetOptions(install, wal_dir=None, settings={}, ...))
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from howfast.errors import UsageError
from howfast.targets.kind import TargetKind


@functools.cache
def kinds() -> tuple[TargetKind, ...]:
    """Every target kind, in their order."""
    import howfast.targets.kinds as package

    found: dict[str, TargetKind] = {}
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        kind = getattr(importlib.import_module(info.name), "KIND", None)
        if not isinstance(kind, TargetKind):
            continue
        if kind.name in found:
            raise RuntimeError(f"target kind {kind.name!r} is defined twice ({info.name})")
        found[kind.name] = kind
    return tuple(sorted(found.values(), key=lambda k: (k.order, k.name)))


def kind_for(text: str) -> TargetKind:
    """The kind of target `text` names; UsageError when none recognises it."""
    for kind in kinds():
        if kind.matches(text):
            return kind
    # The most general kind (the fallback, tried last) first: "a directory or a ... URI".
    usages = " or ".join(k.usage for k in reversed(kinds()) if k.usage)
    raise UsageError(f"unknown target {text!r}: give {usages}")
