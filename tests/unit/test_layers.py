"""The layers of docs/architecture.md: import-linter's contracts in pyproject.toml hold, and
the graph they are checked on counts every import, also those inside functions and under
`if TYPE_CHECKING:` (an import the linter does not see is an upward import it cannot refuse)."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


def test_the_import_contracts_hold() -> None:
    # Prints each contract, KEPT or BROKEN with the chain of imports, on failure.
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True) == 0


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in (SRC / "howfast").rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST, where: str) -> Iterator[tuple[str, str]]:
    """(imported module, where: module|function|type_checking) of every import under node."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import):
            for alias in child.names:
                yield alias.name, where
        elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
            for alias in child.names:
                name = f"{child.module}.{alias.name}"
                yield (name if name in MODULES else child.module), where
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _imports(child, "function")
        elif isinstance(child, ast.If) and _is_type_checking(child) and where == "module":
            for stmt in child.body:
                yield from _imports(ast.Module(body=[stmt], type_ignores=[]), "type_checking")
            for stmt in child.orelse:
                yield from _imports(ast.Module(body=[stmt], type_ignores=[]), where)
        else:
            yield from _imports(child, where)


def edges_only(where: str) -> list[tuple[str, str]]:
    """The imports between two howfast modules, neither inside the other, made only `where`."""
    kinds: dict[tuple[str, str], set[str]] = {}
    for name, path in MODULES.items():
        for imported, kind in _imports(ast.parse(path.read_text()), "module"):
            if imported not in MODULES or imported.startswith(name + ".") or imported == name:
                continue
            if name.startswith(imported + "."):
                continue
            kinds.setdefault((name, imported), set()).add(kind)
    return sorted(edge for edge, found in kinds.items() if found == {where})


@pytest.mark.parametrize("where", ["function", "type_checking"])
def test_the_linter_counts_imports_inside_functions_and_under_type_checking(
    where: str, tmp_path: Path
) -> None:
    # A canary: the project's own linter settings, with one contract that forbids an import
    # the code makes only `where`. It must be broken; if a setting (such as
    # exclude_type_checking_imports = true) hid such imports, it would be kept.
    found = edges_only(where)
    assert found, f"no import made only {where}: pick another canary"
    importer, imported = found[0]
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    options = "\n".join(
        f"{key} = {str(value).lower() if isinstance(value, bool) else repr(value)}"
        for key, value in settings.items()
        if key != "contracts"
    )
    config = tmp_path / "canary.toml"
    config.write_text(
        f"[tool.importlinter]\n{options}\n\n"
        "[[tool.importlinter.contracts]]\n"
        f'name = "canary"\ntype = "forbidden"\nsource_modules = ["{importer}"]\n'
        f'forbidden_modules = ["{imported}"]\nallow_indirect_imports = true\n'
    )
    assert lint_imports(config_filename=str(config), no_cache=True) == 1, (importer, imported)
