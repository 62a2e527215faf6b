"""No function in src/ over 80 lines or 10 parameters (issue 36 item 4): a longer one is
split into named steps, a wider one takes an object (a request, a settings or a parameter
object). Walks every module with ast; a failure names each offender as file:line with its
size. Lines run from `def` to the last line of the body (decorators not counted); parameters
are every name a caller can pass (positional, keyword-only, *args, **kwargs), without the
`self` or `cls` of a method."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

MAX_LINES = 80
MAX_PARAMETERS = 10

# (file relative to src/, function's qualified name): allowed for now.
ALLOWED_WIDE = {}
ALLOWED_LONG: set[tuple[str, str]] = set()

Function = ast.FunctionDef | ast.AsyncFunctionDef


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, Function]]:
    """Every function with its qualified name (Class.method, outer.inner)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + node.name
            yield name, node
            yield from functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, prefix + node.name + ".")
        else:
            yield from functions(node, prefix)


def parameter_count(function: Function, in_class: bool) -> int:
    arguments = function.args
    names = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    count = len(names) + (arguments.vararg is not None) + (arguments.kwarg is not None)
    if in_class and names and names[0].arg in ("self", "cls"):
        count -= 1
    return count


def line_count(function: Function) -> int:
    assert function.end_lineno is not None
    return function.end_lineno - function.lineno + 1


@functools.cache  # one walk of src/ for this file's three tests (seconds each, loaded)
def measured() -> tuple[tuple[str, str, Function, int, int], ...]:
    """(file, qualified name, node, lines, parameters) of every function in src/."""
    return tuple(_measure())


def _measure() -> Iterator[tuple[str, str, Function, int, int]]:
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        methods = {
            id(child)
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef)
            for child in node.body
        }
        for name, function in functions(tree):
            relative = path.relative_to(SRC).as_posix()
            in_class = id(function) in methods
            yield (
                relative,
                name,
                function,
                line_count(function),
                parameter_count(function, in_class),
            )


def test_no_function_is_over_80_lines() -> None:
    offenders = [
        f"src/{file}:{function.lineno} {name}: {lines} lines"
        for file, name, function, lines, _ in measured()
        if lines > MAX_LINES and (file, name) not in ALLOWED_LONG
    ]
    assert offenders == [], "functions over 80 lines (split them into named steps):\n" + "\n".join(
        offenders
    )


def test_no_function_takes_over_10_parameters() -> None:
    offenders = [
        f"src/{file}:{function.lineno} {name}: {parameters} parameters"
        for file, name, function, _, parameters in measured()
        if parameters > MAX_PARAMETERS and (file, name) not in ALLOWED_WIDE
    ]
    assert offenders == [], "functions over 10 parameters (pass an object):\n" + "\n".join(
        offenders
    )


def test_the_measure_sees_a_long_and_a_wide_function() -> None:
    # The walk reaches methods and nested functions and counts as documented.
    source = "class A:\n    def m(self, a, b, *c, d, **e):\n        def inner():\n" + (
        "            pass\n" * 3
    )
    found = {
        name: (line_count(function), parameter_count(function, name == "A.m"))
        for name, function in functions(ast.parse(source))
    }
    assert found == {"A.m": (5, 5), "A.m.inner": (4, 0)}


def test_every_allowed_exception_is_still_an_offender() -> None:
    # An exception that no longer offends is removed here, so the list only shrinks.
    sizes = {(file, name): (lines, parameters) for file, name, _, lines, parameters in measured()}
    stale = [key for key in ALLOWED_LONG if sizes.get(key, (0, 0))[0] <= MAX_LINES]
    stale += [key for key in ALLOWED_WIDE if sizes.get(key, (0, 0))[1] <= MAX_PARAMETERS]
    assert stale == []
