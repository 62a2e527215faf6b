"""A plug-in's parts named as "module:attribute" strings (an executor class, an analysis
hook), imported only by the layer that uses them: declaring a part imports nothing."""

from __future__ import annotations

import importlib


def load(ref: str) -> object:
    """The attribute `ref` names, its module imported now; ValueError for a malformed ref."""
    module, sep, attribute = ref.partition(":")
    if not (sep and module and attribute):
        raise ValueError(f"{ref!r} is not 'module:attribute'")
    return getattr(importlib.import_module(module), attribute)
