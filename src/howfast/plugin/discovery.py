"""One way plug-ins are found, for every kind of them: workloads, samplers, target kinds and
event actions. A plug-in is a module-level object (`PLUGIN`, `SAMPLER`, `KIND`, `ACTION`) of
a built-in module of its package, or the object an installed distribution names in the
kind's entry-point group:

    [project.entry-points."howfast.samplers"]
    gpu = "howfast_gpu.sampler:SAMPLER"

Each registry (plugin/registry.py, samplers/registry.py, targets/registry.py,
events/registry.py) asks `discover` with its own `Discovery` and keeps the answer. Two
plug-ins of one name are refused, naming where each came from (a module, or an entry point
and its distribution): one must not silently hide the other.

The packages are named, not imported by an import statement: they sit above this layer
(docs/architecture.md).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from howfast.errors import HowfastError

T = TypeVar("T")


def _every_module(name: str) -> bool:
    return True


@dataclass(frozen=True)
class Discovery(Generic[T]):
    """Where plug-ins of one kind are, and what they are."""

    noun: str  # in messages: "workload", "sampler", "target kind", "event action"
    # What each plug-in is an instance of (T's class; `type[T]` would refuse abstract ones)
    cls: type[Any]
    package: str  # the package of the built-in ones: "howfast.samplers"
    attribute: str  # the module-level name of a plug-in: "SAMPLER"
    group: str  # the entry-point group of those installed apart: "howfast.samplers"
    name_of: Callable[[T], str]  # a plug-in's name, which must be unique
    # Which modules of the package may hold one (by their dotted name), and whether
    # subpackages are searched too (workloads: `<workload>/plan.py`, at any depth).
    module_filter: Callable[[str], bool] = _every_module
    nested: bool = False


def _built_in_modules(discovery: Discovery[T]) -> Iterator[str]:
    package = importlib.import_module(discovery.package)
    prefix = package.__name__ + "."
    walk = pkgutil.walk_packages if discovery.nested else pkgutil.iter_modules
    for info in walk(package.__path__, prefix):
        if not info.ispkg and discovery.module_filter(info.name):
            yield info.name


def _entry_point_origin(entry: importlib.metadata.EntryPoint) -> str:
    dist = entry.dist.name if entry.dist is not None else None
    origin = f"entry point {entry.name} = {entry.value}"
    return f"{origin} of distribution {dist}" if dist else origin


def _load(discovery: Discovery[T], entry: importlib.metadata.EntryPoint) -> object:
    try:
        return entry.load()
    except Exception as exc:  # a broken distribution names itself, not a traceback of ours
        raise HowfastError(
            f"{discovery.noun} plug-in {entry.name} = {entry.value} cannot be loaded: {exc}"
        ) from exc


def _add(
    discovery: Discovery[T], found: dict[str, tuple[T, str]], obj: object, origin: str
) -> None:
    if not isinstance(obj, discovery.cls):
        raise HowfastError(
            f"{discovery.noun} plug-in {origin} is not a {discovery.cls.__name__}: {obj!r}"
        )
    name = discovery.name_of(obj)
    if name in found:
        raise HowfastError(
            f"{discovery.noun} {name!r} is defined twice: by {found[name][1]} and by {origin}"
        )
    found[name] = (obj, origin)


def discover(discovery: Discovery[T]) -> dict[str, T]:
    """Every plug-in of this kind by name: the built-in ones in their modules' order, then
    the installed ones in their entry points' order. HowfastError for one that cannot be
    loaded, is not a `cls`, or has the name of another."""
    found: dict[str, tuple[T, str]] = {}
    for module_name in _built_in_modules(discovery):
        obj = getattr(importlib.import_module(module_name), discovery.attribute, None)
        if obj is not None:
            _add(discovery, found, obj, f"module {module_name}")
    for entry in importlib.metadata.entry_points(group=discovery.group):
        _add(discovery, found, _load(discovery, entry), _entry_point_origin(entry))
    return {name: obj for name, (obj, _) in found.items()}
