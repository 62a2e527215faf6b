"""The targets are built from parts a reader can hold in mind (issue 36): no class in
targets/ over 300 lines or 20 methods, short constructors, and an emulated volume is a
storage part of a LocalTarget, not a wrapper that forwards every capability."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import howfast.targets
from howfast.targets.capabilities import StorageSlowable
from howfast.targets.emulated.target import EmulatedTarget
from howfast.targets.local import LocalTarget

TARGETS = Path(howfast.targets.__file__).parent
MAX_LINES, MAX_METHODS = 300, 20


def large_classes() -> set[str]:
    found = set()
    for path in sorted(TARGETS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            methods = [b for b in node.body if isinstance(b, ast.FunctionDef)]
            if lines > MAX_LINES or len(methods) > MAX_METHODS:
                found.add(f"{path.relative_to(TARGETS)}:{node.name}")
    return found


def test_no_class_in_targets_is_over_300_lines_or_20_methods() -> None:
    assert large_classes() == set()


def test_the_local_targets_constructors_take_at_most_10_parameters() -> None:
    for cls in (LocalTarget, EmulatedTarget):
        params = inspect.signature(cls.__init__).parameters
        assert len(params) <= 10, (cls.__name__, list(params))


def test_an_emulated_target_adds_only_what_a_volume_does() -> None:
    """Every capability of a local target reaches the emulated one through LocalTarget's
    parts: its own methods are its constructor and StorageSlowable's, nothing forwarded."""
    # (typing adds __subclasshook__ to a class that subclasses a Protocol)
    own = {
        name
        for name, value in vars(EmulatedTarget).items()
        if inspect.isfunction(value) and name != "__subclasshook__"
    }
    slowable = {"added_latency_ms", "set_added_latency", "measure_flush_ms"}
    assert slowable <= set(vars(StorageSlowable))
    assert own == {"__init__"} | slowable
    assert issubclass(EmulatedTarget, LocalTarget)
