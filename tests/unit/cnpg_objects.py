"""The CloudNativePG objects the cnpg:// unit tests read. Today every one is HAND-MADE from
the v1.27.1 API types (tests/data/cnpg/handmade/README.md), not recorded from a real
operator: replace them by the recordings of tests/data/cnpg/v1.27.1/ when those exist."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HANDMADE = Path(__file__).resolve().parents[1] / "data" / "cnpg" / "handmade"


def load(name: str) -> Any:
    return json.loads((HANDMADE / name).read_text())


def items(name: str) -> list[dict[str, Any]]:
    return list(load(name)["items"])
