"""docs/architecture.md's layer table says what the import contract enforces: each row's
packages, in the contract's order and with its separators (`|` independent, `:` may import
each other). The contract is pyproject.toml's; the table is checked against it, so that a
package added to a layer there and not in the docs (events, eventspec, event_marks once) fails
here."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def contract_layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c["id"] == "layers"]
    return [str(layer) for layer in layers["layers"]]


def table_layers() -> list[tuple[int, str]]:
    """(number, packages) of each row of the layer table, packages written as the contract
    writes them: `cli/` : `__main__` -> cli : __main__."""
    rows = []
    for line in (ROOT / "docs" / "architecture.md").read_text().splitlines():
        found = re.match(r"\| (\d+) \| [^|]*(?:\\\|[^|]*)* \| (.*?) \| ", line)
        if found is None:
            continue
        cell = found[2].replace("\\|", "|")
        packages = re.sub(r"`([^`]+?)/?`", r"\1", cell)
        rows.append((int(found[1]), " ".join(packages.split())))
    return rows


def test_the_layer_table_is_the_import_contract() -> None:
    rows = table_layers()
    assert len(rows) == len(contract_layers()), rows
    assert [n for n, _ in rows] == list(range(len(rows) - 1, -1, -1)), rows
    assert [packages for _, packages in rows] == contract_layers()
