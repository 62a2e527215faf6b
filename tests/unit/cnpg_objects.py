"""The CloudNativePG objects the cnpg:// unit tests read: RECORDED from the real 1.27.1
operator (tests/data/cnpg/v1.27.1/: `recorded`, `recorded_item`) where a recording covers the
case, else HAND-MADE from its API types (tests/data/cnpg/handmade/README.md says why each
is still needed: `load`, `items`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HANDMADE = Path(__file__).resolve().parents[1] / "data" / "cnpg" / "handmade"
RECORDED = Path(__file__).resolve().parents[1] / "data" / "cnpg" / "v1.27.1"


def load(name: str) -> Any:
    return json.loads((HANDMADE / name).read_text())


def items(name: str) -> list[dict[str, Any]]:
    return list(load(name)["items"])


def recorded(state: str, name: str) -> Any:
    """A recorded file: state is healthy, promoted or healthy-after-failover."""
    return json.loads((RECORDED / state / name).read_text())


def recorded_item(state: str, name: str, object_name: str) -> dict[str, Any]:
    """One object of a recorded list, by its name."""
    (found,) = [i for i in recorded(state, name)["items"] if i["metadata"]["name"] == object_name]
    return dict(found)
